"""Fencing: what a run's owner may do only while it still holds the run at its epoch.

A process holds a run as (`owner`, `lease_epoch`): every adoption raises the epoch
(`bot.storage.leases.claim_run`), so a process that lost a run without knowing it yet (its
heartbeat stalled, its clock ran ahead of the others', it was paused) holds a stale epoch.
Its checkpoints and endings then change no row (`Fence.where`), and it cannot start a tool
call: `start_call` checks the fence in the transaction that inserts the call's `started` row,
with the run's row locked (a conditional UPDATE: a row lock on PostgreSQL, the write lock on
SQLite) so it serialises with a claim. Behind that check, `call_start`'s key (run, tool call)
makes a second start of one call fail in the database even if a check were missed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, select

from bot.storage.calls import add_call
from bot.storage.dbclock import db_now
from bot.storage.models import CallLog, CallStart, Run

_RUN = Run.__table__.c  # type: ignore[attr-defined]


@dataclass(frozen=True)
class Fence:
    """The run as this process holds it: its owner id and the lease epoch it took it at."""

    owner: str
    epoch: int

    def where(self) -> list[Any]:
        """The conditions under which a write to the run is this holder's to make."""
        return [_RUN.owner == self.owner, _RUN.lease_epoch == self.epoch]


@dataclass(frozen=True)
class Started:
    """What `start_call` did: `started` (the row, with its id), `lost` (the fence failed:
    `why`), or `duplicate` (the call had started before: it must not go out again)."""

    outcome: Literal["started", "lost", "duplicate"]
    row: CallLog | None = None
    why: str = ""


def hold(session: Session, run_id: str, fence: Fence) -> str | None:
    """Lock the run's row if this holder still holds it with a live lease (by the database's
    clock); None then, else why not. A holder whose lease lapsed before anyone took the run
    hands it back (owner cleared, epoch raised): any process, this one included, adopts it."""
    locked = session.connection().execute(
        update(Run.__table__)  # type: ignore[arg-type]
        .where(_RUN.id == run_id, *fence.where(), _RUN.lease_until > db_now())
        .values(lease_epoch=_RUN.lease_epoch)
    )
    if locked.rowcount == 1:
        return None
    row = (
        session.connection()
        .execute(select(_RUN.owner, _RUN.lease_epoch).where(_RUN.id == run_id))
        .first()
    )
    if row is None:
        return "the run is gone"
    owner, epoch = row
    if owner != fence.owner or epoch != fence.epoch:
        return f"another process holds its lease now ({owner or 'nobody'}, epoch {epoch})"
    session.connection().execute(
        update(Run.__table__)  # type: ignore[arg-type]
        .where(_RUN.id == run_id, *fence.where())
        .values(owner=None, lease_epoch=_RUN.lease_epoch + 1)
    )
    return "its lease lapsed by the database's clock (handed back for adoption)"


def start_call(session: Session, row: CallLog, fence: Fence | None) -> Started:
    """Insert a call's `started` row, in one transaction with the checks that allow it: the
    fence (when the run is held by a process) and the call's one start."""
    if fence is not None and row.run_id:
        why = hold(session, row.run_id, fence)
        if why is not None:
            return Started("lost", why=why)
    stored = add_call(session, row)
    if row.run_id and row.tool_call_id:
        try:
            with session.begin_nested():
                session.add(
                    CallStart(
                        run_id=row.run_id, tool_call_id=row.tool_call_id, call_log_id=stored.id or 0
                    )
                )
        except IntegrityError:
            session.rollback()  # the whole attempt: no second `started` row either
            return Started("duplicate")
    return Started("started", row=stored)
