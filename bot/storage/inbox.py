"""Queries of the inbox (`inbox_event`) and its dedupe rows (`processed_event`).

Run through `Database.run` like `bot.storage.queries` (which re-exports these). The batch
insert is what a burst of acknowledgements waits on, so it is two multi-row statements.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from sqlalchemy import delete, insert
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlmodel import Session, select

from bot.storage.models import InboxEvent, ProcessedEvent


class InboxRow(Protocol):
    """What `add_inbox_events` stores of a row (an `InboxEvent` has it too)."""

    platform: str
    kind: str
    payload: dict[str, Any]
    received_at: datetime
    owner: str | None


@dataclass(slots=True)
class NewInboxEvent:
    """An acknowledged event's inbox row, as plain values: one is built on the event loop for
    every acknowledgement, where the ORM's `InboxEvent` costs about 0.1 ms more (the whole of
    a burst's acks wait on the loop)."""

    platform: str
    kind: str
    payload: dict[str, Any]
    received_at: datetime
    owner: str | None = None


def add_inbox_events(session: Session, entries: Sequence[tuple[InboxRow, str]]) -> list[int | None]:
    """Store acknowledged events (one transaction for a batch): each one's inbox id, or None
    when its dedupe key (`platform:event id`) was already recorded (a retry, a re-push).

    Two multi-row statements whatever the batch size (the ack of a burst waits on this):
    the dedupe rows with ON CONFLICT DO NOTHING (the keys it returns are the new ones), then
    the inbox rows, their ids returned in order.
    """
    keys = [key for _, key in entries if key]
    new_keys: set[str] = set()
    if keys:
        rows = [
            {"event_id": key, "platform": row.platform, "created_at": row.received_at}
            for row, key in entries
            if key
        ]
        table = ProcessedEvent.__table__  # type: ignore[attr-defined]
        statement = dialect_insert(session, table).on_conflict_do_nothing()
        unique = list({r["event_id"]: r for r in rows}.values())  # a retry in the same batch
        new_keys = set(session.execute(statement.returning(table.c.event_id), unique).scalars())
    stored: list[InboxRow] = []
    for row, key in entries:
        if not key or key in new_keys:
            new_keys.discard(key)  # the second copy of a key in one batch is a duplicate
            stored.append(row)
    ids: dict[int, int] = {}
    if stored:
        table = InboxEvent.__table__  # type: ignore[attr-defined]
        values = [
            {
                "platform": r.platform,
                "kind": r.kind,
                "payload": r.payload,
                "received_at": r.received_at,
                "owner": r.owner,
            }
            for r in stored
        ]
        returned = session.execute(
            insert(table).returning(table.c.id, sort_by_parameter_order=True), values
        ).scalars()
        ids = {id(row): inbox_id for row, inbox_id in zip(stored, returned, strict=True)}
    return [ids.get(id(row)) for row, _ in entries]


def dialect_insert(session: Session, table: Any) -> Any:
    """INSERT with ON CONFLICT support (SQLite and PostgreSQL spell it the same)."""
    if session.get_bind().dialect.name == "postgresql":
        return pg_insert(table)
    return sqlite_insert(table)


def inbox_events(session: Session) -> list[InboxEvent]:
    """Acknowledged events not processed yet, oldest first."""
    return list(session.exec(select(InboxEvent).order_by(InboxEvent.id)).all())  # type: ignore[arg-type]


def mention_pending(session: Session, key: tuple[str, str, str, str], besides: int) -> bool:
    """Whether a mention of the thread `key` waits in an inbox (any process's) other than row
    `besides`: a reply that reached this process before the mention that opens its thread
    reached the other one must wait for it, not be dropped. The inbox holds only events not
    processed yet, so this reads a few rows."""
    rows = session.exec(
        select(InboxEvent).where(InboxEvent.kind == "message", InboxEvent.id != besides)  # type: ignore[arg-type]
    ).all()
    for row in rows:
        payload = row.payload if isinstance(row.payload, dict) else {}
        thread = payload.get("thread")
        if not isinstance(thread, dict) or not payload.get("mentions_bot", True):
            continue
        found = (thread.get("platform"), thread.get("workspace"), thread.get("channel"),
                 thread.get("root"))  # fmt: skip
        if found == key:
            return True
    return False


def delete_inbox_event(session: Session, inbox_id: int) -> None:
    """One DELETE (no read first): every dispatched message makes it."""
    table = InboxEvent.__table__  # type: ignore[attr-defined]
    session.connection().execute(delete(table).where(table.c.id == inbox_id))
