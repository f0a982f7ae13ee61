"""`chatops audit`: the audit report on the terminal or in a file.

Markdown and JSON render the report: every figure (SQL aggregates, however big the window)
and at most `--limit` mutating calls (default `DEFAULT_LIMIT`; 0 for the summary alone), saying
how many were left out. CSV is one row per call of the window, every one, streamed from the
database in batches so a large window never sits in memory. A report that takes more than a
second shows its progress on stderr (`bot/audit/progress.py`); `--out` is written atomically
(`bot/audit/output.py`). Bad windows, filters, limits and formats are user errors (one line,
exit 2).
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections.abc import Iterable, Iterator

from sqlalchemy import Engine

from bot.audit.output import Interrupts, interruptible, report_output
from bot.audit.progress import Progress
from bot.audit.render import csv_rows, json_text, markdown
from bot.audit.report import AuditQuery, CallEntry, build_report, iter_calls
from bot.config import Settings, load_settings
from bot.errors import UserError
from bot.storage.opening import open_existing

FORMATS = ("md", "csv", "json")
DEFAULT_LIMIT = 100  # mutating calls md and json list unless --limit says (`bot/cli.py`)
MORE_HINT = "`--limit N` lists more; `--format csv` lists every call of the window"


def query_from_args(args: argparse.Namespace) -> AuditQuery:
    """The CLI's window, filters and limit as a query; readable errors for bad values."""
    for name in ("connector", "action", "user", "platform", "workspace"):
        value = getattr(args, name, None)
        if value is not None and not value.strip():
            raise UserError(f"--{name} is empty")
    limit = getattr(args, "limit", None)
    try:
        return AuditQuery.window(
            args.since or "7d",
            args.until,
            connector=args.connector,
            action=args.action,
            user=args.user,
            platform=getattr(args, "platform", None),
            workspace=getattr(args, "workspace", None),
            max_calls=DEFAULT_LIMIT if limit is None else limit,
        )
    except ValueError as exc:
        raise UserError(f"bad window: {exc}") from None


def _open_engine(settings: Settings) -> Engine:
    """The bot's database, which must exist with its call log: a report never creates one."""
    return open_existing(settings.database_url, needs_table="call_log")


def _counted(
    entries: Iterable[CallEntry], progress: Progress, interrupts: Interrupts
) -> Iterator[CallEntry]:
    for entry in entries:
        interrupts.check()
        progress.add_rows()
        yield entry


def audit_command(args: argparse.Namespace) -> int:
    """Build the report for the window and write it in the chosen format."""
    fmt = getattr(args, "format", "md") or "md"
    if fmt not in FORMATS:
        raise UserError(f"unknown format {fmt!r}: use one of {', '.join(FORMATS)}")
    query = query_from_args(args)
    engine = _open_engine(load_settings())
    try:
        with (
            interruptible() as interrupts,
            report_output(getattr(args, "out", None)) as out,
            Progress(sys.stderr) as progress,
        ):
            if fmt == "csv":
                progress.phase("exporting calls")
                calls = _counted(iter_calls(engine, query), progress, interrupts)
                csv.writer(out, lineterminator="\n").writerows(csv_rows(calls))
            else:

                def phase(name: str) -> None:
                    interrupts.check()
                    progress.phase(name)

                report = build_report(engine, query, on_phase=phase)
                phase("writing")
                out.write(
                    markdown(report, more_hint=MORE_HINT) if fmt == "md" else json_text(report)
                )
    finally:
        engine.dispose()
    if args.out:
        print(f"chatops: wrote the audit report to {args.out}", file=sys.stderr)
    return 0
