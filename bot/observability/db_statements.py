"""Counts every statement the runtime's SQLAlchemy engine sends (`chatops_db_statements_total`).

Why: a run's cost is mostly its clients', the database's among them, and the round trips a run
makes are the first thing to cut (issue 29); a counter per process makes them visible in any
deployment and in `bench/scale.py`, not only in a profile. The listener sees each cursor
execution (an `executemany` counts once) and hands only the statement's first keyword on; the
pool's pre-ping and the PostgreSQL wake-ups' own connections (LISTEN/NOTIFY) are outside the
engine's events and not counted.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, event

from bot.observability.metrics import Metrics


def count_statements(engine: Engine, metrics: Metrics) -> None:
    """Count `engine`'s statements in `metrics` from now on (for the engine's lifetime)."""

    def counted(
        _conn: Any, _cursor: Any, statement: str, _params: Any, _context: Any, _many: bool
    ) -> None:
        metrics.db_statement(statement)

    event.listen(engine, "before_cursor_execute", counted)
