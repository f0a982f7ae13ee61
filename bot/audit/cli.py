"""`chatops audit`: the audit report on the terminal or in a file.

Markdown and JSON render the report (every mutating call listed: the CLI sets no cap); CSV is
one row per call of the window, streamed from the database in batches so a large window never
sits in memory. Bad windows, filters and formats are user errors (one line, exit 2).
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from sqlalchemy import Engine, inspect
from sqlalchemy.exc import SQLAlchemyError

from bot.audit.render import csv_rows, json_text, markdown
from bot.audit.report import AuditQuery, build_report, iter_calls
from bot.config import Settings, load_settings
from bot.errors import UserError
from bot.storage.database import create_db_engine

FORMATS = ("md", "csv", "json")


def query_from_args(args: argparse.Namespace) -> AuditQuery:
    """The CLI's window and filters as a query; readable errors for bad values."""
    for name in ("connector", "action", "user"):
        value = getattr(args, name, None)
        if value is not None and not value.strip():
            raise UserError(f"--{name} is empty")
    try:
        return AuditQuery.window(
            args.since or "7d",
            args.until,
            connector=args.connector,
            action=args.action,
            user=args.user,
            max_calls=None,
        )
    except ValueError as exc:
        raise UserError(f"bad window: {exc}") from None


@contextmanager
def _output(path: str | None) -> Iterator[TextIO]:
    if path is None:
        yield sys.stdout
        return
    target = Path(path)
    if not target.parent.is_dir():
        raise UserError(f"--out {path}: directory {target.parent} does not exist")
    try:
        with target.open("w", encoding="utf-8", newline="") as handle:
            yield handle
    except OSError as exc:
        raise UserError(f"--out {path}: {exc.strerror or exc}") from None


def _open_engine(settings: Settings) -> Engine:
    """The bot's database; a missing call log is a user error (the bot never ran there)."""
    engine = create_db_engine(settings.database_url)
    try:
        has_log = inspect(engine).has_table("call_log")
    except SQLAlchemyError as exc:
        engine.dispose()
        raise UserError(f"cannot open the database (DATABASE_URL): {type(exc).__name__}") from None
    if not has_log:
        engine.dispose()
        raise UserError(
            "no call log in the database (DATABASE_URL): run `chatops serve` once to create it"
        )
    return engine


def audit_command(args: argparse.Namespace) -> int:
    """Build the report for the window and write it in the chosen format."""
    fmt = getattr(args, "format", "md") or "md"
    if fmt not in FORMATS:
        raise UserError(f"unknown format {fmt!r}: use one of {', '.join(FORMATS)}")
    query = query_from_args(args)
    engine = _open_engine(load_settings())
    try:
        with _output(getattr(args, "out", None)) as out:
            if fmt == "csv":
                csv.writer(out, lineterminator="\n").writerows(csv_rows(iter_calls(engine, query)))
            else:
                report = build_report(engine, query)
                out.write(markdown(report) if fmt == "md" else json_text(report))
    finally:
        engine.dispose()
    if args.out:
        print(f"chatops: wrote the audit report to {args.out}", file=sys.stderr)
    return 0
