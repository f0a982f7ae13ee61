"""The audit outbox's queries: events queued with the row they report, claimed per sink, removed
once sent.

Queueing is in the storage layer so that it is in the transaction of the change it reports:
`queue_call` runs inside the call log's own writes (`bot.storage.calls`) and `queue_approval`
inside an approval's creation and its one conditional transition
(`bot.storage.approval_queries`). Which sinks exist is the `Database`'s (`OutboxSinks`, carried on
each session it opens); with none configured nothing is queued and nothing is read.

Sending is ordered and once per sink: `claim_batch` takes the sink's lease (a conditional
UPDATE by the database's clock: one process at a time sends for a sink) and reads its oldest
rows; `mark_sent` deletes them only while the lease is still this holder's, in one transaction
with renewing it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session

from bot.clock import as_utc, utcnow
from bot.storage.dbclock import db_now
from bot.storage.models import Approval, AuditOutbox, AuditSinkLease, CallLog

_OUTBOX = AuditOutbox.__table__.c  # type: ignore[attr-defined]
_LEASE = AuditSinkLease.__table__.c  # type: ignore[attr-defined]
ERROR_CHARS = 300  # an error's text in an event: enough to say what failed, never a whole output


@dataclass(frozen=True)
class OutboxSinks:
    """The configured sinks' names: each event gets one outbox row per sink."""

    names: tuple[str, ...] = ()


_SESSION_KEY = "chatops.outbox_sinks"  # where `Database` puts its `OutboxSinks` on a session


def session_info(sinks: OutboxSinks) -> dict[str, Any]:
    """What a `Database` opens its sessions with, so the queries below know the sinks."""
    return {_SESSION_KEY: sinks} if sinks.names else {}


def sinks_of(session: Session) -> tuple[str, ...]:
    found = session.info.get(_SESSION_KEY)
    return found.names if isinstance(found, OutboxSinks) else ()


def _iso(value: datetime | None) -> str | None:
    return as_utc(value).isoformat() if value is not None else None


def _queue(session: Session, kind: str, event_uid: str, snapshot: dict[str, Any]) -> None:
    # one Core INSERT (no unit-of-work bookkeeping): this is on every tool call's path
    at = utcnow()
    session.connection().execute(
        AuditOutbox.__table__.insert(),  # type: ignore[attr-defined]
        [
            {"sink": sink, "event_uid": event_uid, "kind": kind, "at": at,
             "snapshot": snapshot, "attempts": 0, "last_error": ""}
            for sink in sinks_of(session)
        ],
    )  # fmt: skip


def queue_call(session: Session, row: CallLog, call_id: int | None = None) -> None:
    """The call-log row's event (its state now: started, or its outcome); `call_id` for a row
    completed by UPDATE (`row` then holds the completion, not the id). The row is redacted
    already; its arguments and the tool's output are left out all the same."""
    if not sinks_of(session):
        return
    if call_id is None and row.id is None:
        session.flush()  # the new row's id names its event
    call_id = call_id if call_id is not None else row.id
    snapshot = {
        "call_id": call_id,
        "at": _iso(utcnow()),
        "started_at": _iso(row.at) if call_id == row.id else None,
        **{
            name: getattr(row, name)
            for name in (
                "run_id",
                "tool_call_id",
                "conversation_id",
                "platform",
                "channel",
                "direct",
                "requester",
                "requesters",
                "connector",
                "action",
                "tool_name",
                "mutating",
                "fingerprint",
                "approval_id",
                "approval_status",
                "policy_rule",
                "grant_id",
                "approvers",
                "result_status",
                "duration_ms",
                "edited_by",
            )
        },  # fmt: skip
        "error": (row.error or "")[:ERROR_CHARS],
    }
    _queue(session, "call", f"call-{call_id}-{row.result_status}", snapshot)


def queue_outcome_unknown(session: Session, row: CallLog) -> None:
    """A resumed run met a call that started and never completed: its outcome is unknown."""
    if not sinks_of(session):
        return
    unknown = row.model_copy(update={"result_status": "unknown", "error": "outcome unknown"})
    queue_call(session, unknown, row.id)


def queue_approval(session: Session, approval_id: str, *, edited: bool = False) -> None:
    """The approval's event in its state now (requested, or how it ended); `edited`: an
    approver has just edited the call it is for (it stays pending)."""
    if not sinks_of(session):
        return
    # populate_existing: a Core UPDATE in this transaction may have changed a loaded row
    row = session.get(Approval, approval_id, populate_existing=True)
    if row is None:
        return
    decided = as_utc(row.decided_at) if row.decided_at is not None else None
    waited_ms = (decided - as_utc(row.created_at)).total_seconds() * 1000 if decided else None
    snapshot = {
        "approval_id": row.id,
        "at": _iso(utcnow() if edited else decided or row.created_at),
        "created_at": _iso(row.created_at),
        "decided_at": _iso(decided),
        "expires_at": _iso(row.expires_at),
        "status": str(row.status),
        "decided_by": list(row.decided_by),
        "decision_reason": row.decision_reason[:ERROR_CHARS],
        "waited_ms": round(waited_ms, 3) if waited_ms is not None else None,
        "platform": row.card_platform or "",
        "channel": row.card_channel or "",
        **{
            name: getattr(row, name)
            for name in (
                "run_id",
                "tool_call_id",
                "conversation_id",
                "tool_name",
                "connector",
                "action",
                "fingerprint",
                "requester",
                "requesters",
                "approvers",
                "min_approvals",
                "risk",
                "policy_rule",
                "thread_grant",
                "edited_by",
                "model_fingerprint",
            )
        },  # fmt: skip
        "edited": edited,
    }
    state = f"edited-{row.fingerprint[:16]}" if edited else str(row.status)
    _queue(session, "approval", f"approval-{row.id}-{state}", snapshot)


def _take_lease(session: Session, sink: str, holder: str, lease_s: float) -> bool:
    """This holder sends for `sink` now (its lease renewed, or a lapsed one taken over)."""
    taken = session.connection().execute(
        update(AuditSinkLease.__table__)  # type: ignore[arg-type]
        .where(_LEASE.sink == sink, or_(_LEASE.holder == holder, _LEASE.until < db_now()))
        .values(holder=holder, until=db_now(lease_s))
    )
    if taken.rowcount == 1:
        return True
    if session.connection().execute(select(_LEASE.sink).where(_LEASE.sink == sink)).first():
        return False  # another process holds it
    try:
        with session.begin_nested():
            session.connection().execute(
                AuditSinkLease.__table__.insert().values(  # type: ignore[attr-defined]
                    sink=sink, holder=holder, until=db_now(lease_s)
                )
            )
    except IntegrityError:
        return False  # another process made it first
    return True


def claim_batch(
    session: Session, sink: str, holder: str, *, lease_s: float, limit: int
) -> list[AuditOutbox]:
    """The sink's oldest `limit` events, if this holder has (or now takes) the sink's lease;
    [] when another process sends for it."""
    if not _take_lease(session, sink, holder, lease_s):
        return []
    rows = session.connection().execute(
        select(AuditOutbox.__table__)  # type: ignore[call-overload]
        .where(_OUTBOX.sink == sink)
        .order_by(_OUTBOX.id)
        .limit(limit)
    )
    return [AuditOutbox(**dict(row._mapping)) for row in rows]


def mark_sent(
    session: Session, sink: str, holder: str, ids: Sequence[int], *, lease_s: float
) -> bool:
    """Remove the sent rows, if the lease is still this holder's (renewed); False if it lapsed
    meanwhile (the rows stay: whoever holds the sink now sends them)."""
    kept = session.connection().execute(
        update(AuditSinkLease.__table__)  # type: ignore[arg-type]
        .where(_LEASE.sink == sink, _LEASE.holder == holder, _LEASE.until > db_now())
        .values(until=db_now(lease_s))
    )
    if kept.rowcount != 1:
        return False
    session.connection().execute(
        delete(AuditOutbox.__table__).where(_OUTBOX.id.in_(list(ids)))  # type: ignore[arg-type]
    )
    return True


def note_failure(session: Session, ids: Sequence[int], error: str) -> None:
    """Count a failed attempt on the rows (what an operator reads while a sink is down)."""
    session.connection().execute(
        update(AuditOutbox.__table__)  # type: ignore[arg-type]
        .where(_OUTBOX.id.in_(list(ids)))
        .values(attempts=_OUTBOX.attempts + 1, last_error=error[:ERROR_CHARS])
    )


def release_lease(session: Session, sink: str, holder: str) -> None:
    """Hand the sink back at shutdown, so another process takes it without waiting a lease."""
    session.connection().execute(
        update(AuditSinkLease.__table__)  # type: ignore[arg-type]
        .where(_LEASE.sink == sink, _LEASE.holder == holder)
        .values(holder="", until=db_now(-1.0))
    )


def pending_events(session: Session, sink: str | None = None) -> int:
    """How many events wait (for one sink, or all)."""
    statement = select(func.count()).select_from(AuditOutbox.__table__)  # type: ignore[arg-type]
    if sink is not None:
        statement = statement.where(_OUTBOX.sink == sink)
    return int(session.connection().execute(statement).scalar_one())
