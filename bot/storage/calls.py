"""Queries of the call log: the write-ahead row, its completion, and the replay lookups.

Run through `bot.storage.database.Database.run` like `bot.storage.queries` (which re-exports these).
Each write also queues its event for the audit sinks (`bot.storage.outbox`), in its transaction.
"""

from __future__ import annotations

from sqlalchemy import update
from sqlmodel import Session, select

from bot.storage.models import CALL_LOST, CallLog
from bot.storage.outbox import queue_call


def append_call(session: Session, row: CallLog) -> None:
    session.add(row)
    queue_call(session, row)  # its audit sinks' event, in this transaction


def add_call(session: Session, row: CallLog) -> CallLog:
    """Insert a (write-ahead) row and return it with its id."""
    session.add(row)
    session.flush()
    queue_call(session, row)
    return row


_CALL = CallLog.__table__.c  # type: ignore[attr-defined]
_COMPLETED_FIELDS = ("result_status", "observation", "duration_ms", "error")


def complete_call(session: Session, call_id: int, row: CallLog) -> None:
    """Complete a `started` row with the attempt's outcome (the one update a row ever gets)."""
    values = {name: getattr(row, name) for name in _COMPLETED_FIELDS}
    statement = update(CallLog.__table__).where(_CALL.id == call_id).values(**values)  # type: ignore[arg-type]
    session.connection().execute(statement)
    queue_call(session, row, call_id)


def recorded_call(session: Session, run_id: str, tool_call_id: str) -> CallLog | None:
    """The first logged attempt of one tool call: the idempotency record a resumed run replays
    (an attempt refused because its process had lost the run never ran: it is not one)."""
    return session.exec(
        select(CallLog)
        .where(
            CallLog.run_id == run_id,
            CallLog.tool_call_id == tool_call_id,
            CallLog.result_status != CALL_LOST,
        )
        .order_by(CallLog.id)  # type: ignore[arg-type]
    ).first()


def calls_for_run(session: Session, run_id: str) -> list[CallLog]:
    return list(
        session.exec(
            select(CallLog).where(CallLog.run_id == run_id).order_by(CallLog.id)  # type: ignore[arg-type]
        ).all()
    )
