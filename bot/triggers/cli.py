"""`chatops triggers validate|list`: trigger files checked without network.

Like `chatops manifests`: problems are printed one a line (file, field, line and column) with
exit status 1, never a traceback; `validate` also notes a secret variable that is not set,
because the bot leaves that trigger off.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TextIO

from bot.config import connector_environ, load_settings
from bot.triggers.loading import TriggerFileError, load_trigger_dir
from bot.triggers.schema import Trigger

EXIT_INVALID = 1


def _directory(args: argparse.Namespace) -> Path:
    if getattr(args, "dir", None):
        return Path(args.dir)
    return load_settings().chatops_triggers_dir


def _load(directory: Path, err: TextIO) -> list[tuple[Path, Trigger]] | None:
    try:
        return load_trigger_dir(directory, slack_oauth=load_settings().slack_oauth)
    except TriggerFileError as exc:
        for line in str(exc).splitlines():
            print(f"error: {line}", file=err)
        return None


def validate(directory: Path, out: TextIO, err: TextIO) -> int:
    loaded = _load(directory, err)
    if loaded is None:
        return EXIT_INVALID
    if not loaded:
        print(f"{directory}: no triggers (*.yaml, *.yml)", file=out)
    environ = connector_environ()
    for path, trigger in loaded:
        print(f"ok: {path}: {trigger.name}, {trigger.source} -> {_where(trigger)}", file=out)
        if not environ.get(trigger.secret_env):
            print(
                f"  note: {trigger.secret_env} is not set; the bot leaves {trigger.name!r} off "
                "until it is",
                file=out,
            )
    return 0


def listing(directory: Path, out: TextIO, err: TextIO) -> int:
    loaded = _load(directory, err)
    if loaded is None:
        return EXIT_INVALID
    for _, trigger in loaded:
        connectors = ", ".join(trigger.connectors) or "every connector"
        print(f"POST /hooks/{trigger.name}", file=out)
        print(f"  source: {trigger.source} (secret ${trigger.secret_env})", file=out)
        print(f"  where: {_where(trigger)}", file=out)
        print(f"  request: {' '.join(trigger.request.split())}", file=out)
        print(f"  connectors: {connectors}", file=out)
        print(f"  requester: {trigger.requester_id}", file=out)
        print(f"  on resolved: {trigger.on_resolved}", file=out)
    return 0


def _where(trigger: Trigger) -> str:
    where = trigger.where
    return f"{where.platform} {where.channel}" + (
        f" ({where.workspace})" if where.workspace else ""
    )


def triggers_command(args: argparse.Namespace) -> int:
    directory = _directory(args)
    if args.verb == "validate":
        return validate(directory, sys.stdout, sys.stderr)
    return listing(directory, sys.stdout, sys.stderr)
