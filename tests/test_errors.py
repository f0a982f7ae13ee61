"""One exception tree: every exception class the bot defines derives from `ChatopsError`.

Lower layers find their bases in `bot.errors` (the engine in `bot.engine.errors`), never in the
CLI or the runtime; callers that catch `ValueError` keep working where an error is one too.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import bot
import connectors
import hooks
from bot.approvals.rules import RuleError
from bot.audit.command import AuditCommandError
from bot.cli import main
from bot.errors import ChatopsError, ConfigError, StartupError, UserError


def defined_exceptions() -> list[type[BaseException]]:
    """Public exception classes defined (not merely imported) in bot, hooks and connectors."""
    found = []
    for package in (bot, hooks, connectors):
        for info in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            if ".migrations" in info.name:  # alembic scripts run only inside alembic
                continue
            module = importlib.import_module(info.name)
            for name, value in vars(module).items():
                if (
                    inspect.isclass(value)
                    and issubclass(value, BaseException)
                    and value.__module__ == module.__name__
                    and not name.startswith("_")
                ):
                    found.append(value)
    return found


def test_every_exception_the_bot_defines_is_a_chatops_error() -> None:
    exceptions = defined_exceptions()
    assert len(exceptions) >= 15  # the walk found the tree, not nothing
    strays = [f"{e.__module__}.{e.__name__}" for e in exceptions if not issubclass(e, ChatopsError)]
    assert strays == []


def test_value_errors_stay_value_errors() -> None:
    """`except ValueError` sites that catch these keep working."""
    assert issubclass(RuleError, ValueError) and issubclass(AuditCommandError, ValueError)


def test_a_bad_setting_is_a_user_error_printed_without_a_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert issubclass(ConfigError, UserError) and not issubclass(StartupError, UserError)
    monkeypatch.setenv("PORT", "not-a-port")
    assert main(["audit", "--since", "1d"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("chatops: error: bad configuration: PORT:") and "Traceback" not in err
