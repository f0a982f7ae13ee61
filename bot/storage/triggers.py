"""Queries of `trigger_alert`: claim an alert once across processes, record its thread, resolve.

Run through `Database.run_first` (a webhook's 200 waits on them). The claim is an INSERT ... ON
CONFLICT DO NOTHING, so two processes receiving the same alert at once store one row and exactly
one of them opens the thread. A claim left `opening` by a process that died before its thread
was opened is taken over by the sender's next retry once it is `stale_s` old.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import delete, update
from sqlmodel import Session

from bot.storage.inbox import dialect_insert
from bot.storage.models.triggers import (
    ALERT_OPEN,
    ALERT_OPENING,
    ALERT_RESOLVED,
    TriggerAlert,
)

ThreadKey = tuple[str, str, str, str]  # platform, workspace, channel, root


def claim_alert(session: Session, trigger: str, key: str, *, now: datetime, stale_s: float) -> bool:
    """True when this delivery is the alert's first (or takes over a stale claim)."""
    table = TriggerAlert.__table__  # type: ignore[attr-defined]
    row = {
        "trigger": trigger,
        "alert_key": key,
        "state": ALERT_OPENING,
        "platform": "",
        "workspace": "",
        "channel": "",
        "root": "",
        "claimed_at": now,
    }
    statement = (
        dialect_insert(session, table).values(**row).on_conflict_do_nothing().returning(table.c.id)
    )
    if session.execute(statement).first() is not None:
        return True
    stale = (
        update(table)
        .where(
            table.c.trigger == trigger,
            table.c.alert_key == key,
            table.c.state == ALERT_OPENING,
            table.c.claimed_at < now - timedelta(seconds=stale_s),
        )
        .values(claimed_at=now)
        .returning(table.c.id)
    )
    return session.execute(stale).first() is not None


def alert_opened(session: Session, trigger: str, key: str, thread: ThreadKey) -> None:
    """The alert's thread is open (its request is stored in the inbox in the same breath)."""
    platform, workspace, channel, root = thread
    table = TriggerAlert.__table__  # type: ignore[attr-defined]
    session.execute(
        update(table)
        .where(table.c.trigger == trigger, table.c.alert_key == key)
        .values(
            state=ALERT_OPEN, platform=platform, workspace=workspace, channel=channel, root=root
        )
    )


def release_alert(session: Session, trigger: str, key: str) -> None:
    """Opening the thread failed: forget the claim, so the sender's retry tries again."""
    table = TriggerAlert.__table__  # type: ignore[attr-defined]
    session.execute(
        delete(table).where(
            table.c.trigger == trigger, table.c.alert_key == key, table.c.state == ALERT_OPENING
        )
    )


def resolve_alert(session: Session, trigger: str, key: str, *, now: datetime) -> ThreadKey | None:
    """Mark an open alert resolved; its thread, or None when there is none to tell (never
    opened here, or resolved already: a redelivered resolution)."""
    table = TriggerAlert.__table__  # type: ignore[attr-defined]
    statement = (
        update(table)
        .where(table.c.trigger == trigger, table.c.alert_key == key, table.c.state == ALERT_OPEN)
        .values(state=ALERT_RESOLVED, resolved_at=now)
        .returning(table.c.platform, table.c.workspace, table.c.channel, table.c.root)
    )
    found = session.execute(statement).first()
    return (found[0], found[1], found[2], found[3]) if found is not None else None
