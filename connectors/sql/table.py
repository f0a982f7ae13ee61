"""Rows as a compact text table for the model: column names, the first rows, how many, and
whether the row cap cut the result (so the model knows to filter or aggregate instead)."""

from __future__ import annotations

import datetime
import decimal
import uuid
from collections.abc import Callable
from typing import Any

from connectors.results import truncate
from connectors.sql.database import Rows
from connectors.sql.manifest import SqlResultSpec

NULL = "NULL"


def cell(value: Any, max_chars: int) -> str:
    """One value on one line: NULL, text as is, bytes as hex, the rest by `str`."""
    if value is None:
        shown = NULL
    elif isinstance(value, bytes | bytearray | memoryview):
        shown = "0x" + bytes(value)[: max_chars // 2].hex()
    elif isinstance(value, datetime.date | datetime.time | decimal.Decimal | uuid.UUID):
        shown = str(value)
    else:
        shown = str(value)
    shown = shown.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
    shown = shown.replace("|", "\\|")
    if len(shown) > max_chars:
        shown = shown[: max_chars - 1] + "…"
    return shown


def render_rows(rows: Rows, spec: SqlResultSpec, *, redact: Callable[[str], str] = str) -> str:
    """The observation: a `|` table, then a line with the row count (and the cut, if any);
    redacted before it is cut to `max_chars`, so a secret across the cut is still caught."""
    if not rows.columns:
        if rows.affected is None or rows.affected < 0:
            return "Done."
        return f"Done: {rows.affected} row{'' if rows.affected == 1 else 's'} affected."
    lines = [" | ".join(cell(name, spec.max_cell_chars) for name in rows.columns)]
    lines += [" | ".join(cell(v, spec.max_cell_chars) for v in row) for row in rows.rows]
    count = len(rows.rows)
    if rows.more:
        lines.append(f"({count} rows shown; truncated at {count} rows: more rows exist)")
    else:
        lines.append(f"({count} row{'' if count == 1 else 's'})")
    return truncate(redact("\n".join(lines)), spec.max_chars)
