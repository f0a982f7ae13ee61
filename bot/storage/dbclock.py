"""The database's clock, as a SQL expression: leases are set and judged by it, never by a host's.

Two processes whose wall clocks disagree (a host 60 s ahead, a VM that drifted) must agree on
whether a lease lapsed, so a lease's end is computed in the statement that stores it and its
lapse in the statement that judges it, both from the one clock they share: the database's.
`db_now(offset_s)` renders as `clock_timestamp() + <offset>` on PostgreSQL (the real time,
not the transaction's start: a statement that waited on a lock sees the time it runs at) and
as the current UTC time in SQLAlchemy's own SQLite text format on SQLite (which stores
`DateTime` as `YYYY-MM-DD HH:MM:SS.ffffff`, so the two compare correctly as text).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import DateTime
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.expression import FunctionElement
from sqlalchemy.sql.visitors import InternalTraversal


class db_now(FunctionElement[Any]):  # noqa: N801 - reads as the SQL function it stands for
    """The database's current time plus `offset_s` seconds (a lease's end: `db_now(lease_s)`)."""

    type = DateTime(timezone=True)
    # the offset is part of the cache key, so each (dialect, offset) compiles once: a lease's
    # offset is a setting, and compiling a statement anew costs ~0.3 ms of a worker per call
    _traverse_internals = [
        *FunctionElement._traverse_internals,
        ("offset_s", InternalTraversal.dp_plain_obj),
    ]
    inherit_cache = True

    def __init__(self, offset_s: float = 0.0) -> None:
        self.offset_s = float(offset_s)
        super().__init__()


@compiles(db_now, "postgresql")
def _postgresql(element: db_now, compiler: Any, **kw: Any) -> str:
    return f"(clock_timestamp() + make_interval(secs => {element.offset_s!r}))"


@compiles(db_now, "sqlite")
def _sqlite(element: db_now, compiler: Any, **kw: Any) -> str:
    # strftime's %f is SS.SSS: three more digits make SQLAlchemy's six-digit microseconds
    return f"(strftime('%Y-%m-%d %H:%M:%f', 'now', '{element.offset_s:+.3f} seconds') || '000')"


@compiles(db_now)
def _other(element: db_now, compiler: Any, **kw: Any) -> str:
    return f"(CURRENT_TIMESTAMP + INTERVAL '{element.offset_s!r}' SECOND)"
