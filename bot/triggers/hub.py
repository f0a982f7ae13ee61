"""The loaded triggers of a process and their secrets; the ones whose secret is unset are off.

Loaded once when the app is built (`TriggerHub.load`): a trigger file that does not validate
stops start-up like a bad manifest, while a trigger whose secret variable is unset is skipped
with one log line (a fresh checkout's example triggers must not stop `make run`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from bot.triggers.loading import TriggerFileError, load_trigger_dir
from bot.triggers.schema import Trigger

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ArmedTrigger:
    """A trigger that answers: its definition and the secret its deliveries are checked with."""

    trigger: Trigger
    secret: str = field(repr=False)


@dataclass
class TriggerHub:
    """Trigger name -> armed trigger; `skipped`: one line per trigger left off, and why."""

    armed: dict[str, ArmedTrigger] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)

    @classmethod
    def load(
        cls,
        directory: Path,
        environ: Mapping[str, str],
        *,
        explicit: bool,
        slack_oauth: bool = False,
    ) -> TriggerHub:
        """Every trigger of `directory`; no directory: none (an `explicit` setting must exist).
        Raises `TriggerFileError` for a file that does not validate (`slack_oauth`: a Slack
        trigger must name its workspace)."""
        hub = cls()
        if not directory.is_dir():
            if explicit:
                raise TriggerFileError(f"CHATOPS_TRIGGERS_DIR={directory} is not a directory")
            return hub
        for path, trigger in load_trigger_dir(directory, slack_oauth=slack_oauth):
            secret = environ.get(trigger.secret_env, "")
            if not secret:
                why = f"{trigger.secret_env} is not set"
                hub.skipped[trigger.name] = why
                log.warning(
                    "trigger %r (%s) is off: %s; POST /hooks/%s answers 404 until it is",
                    trigger.name, path, why, trigger.name,
                )  # fmt: skip
                continue
            hub.armed[trigger.name] = ArmedTrigger(trigger, secret)
        if hub.armed:
            log.info("triggers on: %s", ", ".join(f"POST /hooks/{n}" for n in sorted(hub.armed)))
        return hub

    def secrets(self) -> list[str]:
        """Every armed trigger's secret (masked in every log line and output)."""
        return [armed.secret for armed in self.armed.values()]
