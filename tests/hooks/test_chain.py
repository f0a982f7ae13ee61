"""The hook order of every entry point, read from the registry its real builder makes.

The order is security-relevant: the replay check comes first (a call logged for a resumed run
is never run again), the cheap guards refuse before a human is asked, and the write-ahead row
is the last PreToolUse hook (it means "every check allowed this call, it goes out"); after the
call, secrets are redacted before anything else sees the result and the call log comes last.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.approvals.broker import ApprovalBroker
from bot.config import Settings
from bot.engine.hooks import HookResult, PreToolUseContext
from bot.redaction import Redactor
from bot.runtime import Runtime
from bot.storage.database import Database, create_db_engine
from bot.terminal.approval import TerminalApproval
from bot.terminal.log import TerminalLog
from hooks.chain import runtime_chain

SERVE_PRE = [
    "call_replay",
    "read_only",
    "rate_limit",
    "audit_viewers",
    "approval_gate",
    "credentials",
    "call_log_start",
]
POST = ["redact_result", "truncate_result", "call_log"]
SERVE_POST = ["redact_result", "truncate_result", "edit_notice", "call_log"]


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(_env_file=None, database_url=f"sqlite:///{tmp_path / 'chatops.db'}")


async def test_chatops_serve_runs_replay_first_and_the_write_ahead_row_last(
    settings: Settings,
) -> None:
    runtime = Runtime.create(settings)  # what `chatops serve` builds, before any I/O
    try:
        assert runtime.hooks.pre_hook_names() == SERVE_PRE
        assert runtime.hooks.post_hook_names() == SERVE_POST
        assert runtime.agent.hooks is runtime.hooks
    finally:
        await runtime.close()


async def test_a_read_only_serve_keeps_the_same_order(settings: Settings) -> None:
    runtime = Runtime.create(settings.model_copy(update={"chatops_read_only": True}))
    try:
        assert runtime.hooks.pre_hook_names() == SERVE_PRE
    finally:
        await runtime.close()


class _Approval:
    """The terminal's approval hook stand-in: the order test never calls it."""

    async def __call__(self, ctx: PreToolUseContext) -> HookResult:
        raise AssertionError("not called")


@pytest.fixture
def terminal_log(settings: Settings) -> Iterator[TerminalLog]:
    log = TerminalLog(create_db_engine(settings.database_url), user="alice", settings=settings)
    yield log
    log.close()


@pytest.mark.parametrize("read_only", [False, True])
def test_chatops_chat_asks_where_the_gate_sits_and_logs_last(
    terminal_log: TerminalLog, settings: Settings, read_only: bool
) -> None:
    config = settings.model_copy(update={"chatops_read_only": read_only})
    hooks = terminal_log.install(
        _Approval(), config, name=TerminalApproval.name, redactor=Redactor(["s3cret"])
    )
    guards = ["read_only"] if read_only else []
    assert hooks.pre_hook_names() == [*guards, "terminal_approval", "call_log_start"]
    assert hooks.post_hook_names() == POST


def test_chatops_chat_without_a_redactor_still_truncates_and_logs(
    terminal_log: TerminalLog, settings: Settings
) -> None:
    hooks = terminal_log.install(_Approval(), settings, name=TerminalApproval.name)
    assert hooks.pre_hook_names() == ["terminal_approval", "call_log_start"]
    assert hooks.post_hook_names() == ["truncate_result", "call_log"]


def test_the_runtime_chain_without_guards_keeps_replay_gate_and_log(
    terminal_log: TerminalLog, settings: Settings
) -> None:
    """What the run tests and the benches build: the guards they leave out are simply absent."""
    db = Database(terminal_log.engine)
    hooks = runtime_chain(broker=ApprovalBroker(db=db, settings=settings), db=db)
    assert hooks.pre_hook_names() == ["call_replay", "approval_gate", "call_log_start"]
    assert hooks.post_hook_names() == ["edit_notice", "call_log"]
