"""Queries of run ownership across processes: process leases, run leases, adoption, run mail.

Run through `Database.run` like `bot.storage.queries`. Every take-over is a conditional UPDATE
(compare-and-set on the owner, re-checking that the lease is dead), so of two processes
adopting one run, or one inbox event, or one reply, exactly one wins. `bot.runs.leases` decides
who is dead and what to do with what it won.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy import delete, func, insert, or_, update
from sqlmodel import Session, select

from bot.clock import utcnow
from bot.statuses import LIVE_RUN_STATES, UNFINISHED_RUN_STATES, RunStatus
from bot.storage.dbclock import db_now
from bot.storage.models import (
    BotProcess,
    Conversation,
    InboxEvent,
    Run,
    RunMail,
)

T = TypeVar("T")

_RUN = Run.__table__.c  # type: ignore[attr-defined]
_PROCESS = BotProcess.__table__.c  # type: ignore[attr-defined]
_INBOX = InboxEvent.__table__.c  # type: ignore[attr-defined]
_MAIL = RunMail.__table__.c  # type: ignore[attr-defined]


@dataclass(frozen=True)
class RunLease:
    """What a heartbeat reads back about one of its runs."""

    run_id: str
    owner: str | None
    status: RunStatus
    stopped_by: str | None


def register_process(session: Session, me: str, host: str, pid: int, lease_s: float) -> None:
    """This process's row, its lease ending `lease_s` from now by the database's clock."""
    session.connection().execute(delete(BotProcess.__table__).where(_PROCESS.id == me))  # type: ignore[arg-type]
    session.connection().execute(
        insert(BotProcess.__table__).values(  # type: ignore[arg-type]
            id=me, host=host, pid=pid, started_at=utcnow(), lease_until=db_now(lease_s)
        )
    )


def beat(session: Session, me: str, lease_s: float, run_ids: Sequence[str]) -> list[RunLease]:
    """Renew this process's lease and its runs' (one transaction, by the database's clock);
    read back those runs (a run another process took over, or someone stopped, shows here)."""
    until = db_now(lease_s)
    session.connection().execute(
        update(BotProcess.__table__).where(_PROCESS.id == me).values(lease_until=until)  # type: ignore[arg-type]
    )
    if not run_ids:
        return []
    session.connection().execute(
        update(Run.__table__)  # type: ignore[arg-type]
        .where(_RUN.id.in_(run_ids), _RUN.owner == me, _RUN.status.in_(UNFINISHED_RUN_STATES))
        .values(lease_until=until)
    )
    rows = session.connection().execute(
        select(_RUN.id, _RUN.owner, _RUN.status, _RUN.stopped_by).where(_RUN.id.in_(run_ids))
    )
    return [RunLease(*row) for row in rows]


def release(session: Session, me: str) -> None:
    """A clean shutdown: this process's runs and inbox events are free to take at once."""
    session.connection().execute(
        update(Run.__table__)  # type: ignore[arg-type]
        .where(_RUN.owner == me, _RUN.status.in_(UNFINISHED_RUN_STATES))
        .values(lease_until=db_now())
    )
    session.connection().execute(
        update(InboxEvent.__table__).where(_INBOX.owner == me).values(owner=None)  # type: ignore[arg-type]
    )
    session.connection().execute(delete(BotProcess.__table__).where(_PROCESS.id == me))  # type: ignore[arg-type]


def beat_and_count(
    session: Session, me: str, lease_s: float, run_ids: Sequence[str]
) -> tuple[list[RunLease], int]:
    """`beat`, and how many processes hold a live lease now (this one included), in the same
    transaction: what each process's share of a workspace's Slack budget is computed from."""
    leases = beat(session, me, lease_s, run_ids)
    return leases, live_count(session)


@dataclass(frozen=True)
class ClockReading:
    """The database's time, and this host's just before and after the statement read it."""

    database: datetime
    sent: datetime
    received: datetime


def read_clock(session: Session, local: Callable[[], datetime]) -> ClockReading:
    """One reading of the database's clock against this host's (`local`)."""
    sent = local()
    database = session.connection().execute(select(db_now())).scalar_one()
    return ClockReading(database, sent, local())


def live_count(session: Session) -> int:
    """How many processes hold a live lease, by the database's clock."""
    found = session.connection().execute(
        select(func.count())
        .select_from(BotProcess.__table__)
        .where(_PROCESS.lease_until > db_now())  # type: ignore[arg-type]
    )
    return int(found.scalar_one())


def live_processes(session: Session) -> set[str]:
    """The processes whose lease has not lapsed, by the database's clock."""
    rows = session.connection().execute(select(_PROCESS.id).where(_PROCESS.lease_until > db_now()))
    return {row[0] for row in rows}


def prune_processes(session: Session, older_than_s: float) -> None:
    """Forget processes whose lease lapsed long ago (nothing of theirs is left to take)."""
    session.connection().execute(
        delete(BotProcess.__table__).where(_PROCESS.lease_until < db_now(-older_than_s))  # type: ignore[arg-type]
    )


def foreign_owners(session: Session, me: str) -> set[str]:
    """The other owners of unfinished runs and unprocessed inbox events ('' for none)."""
    runs = session.connection().execute(
        select(_RUN.owner).where(_RUN.status.in_(UNFINISHED_RUN_STATES)).distinct()
    )
    inbox = session.connection().execute(select(_INBOX.owner).distinct())
    owners = {owner or "" for (owner,) in (*runs, *inbox)}
    owners.discard(me)
    return owners


def adoptable_runs(
    session: Session, me: str, dead: Collection[str], platforms: Collection[str]
) -> list[tuple[Run, Conversation]]:
    """Unfinished runs whose owner is gone or whose lease lapsed, oldest first, on the
    `platforms` this process serves (a run it could not tell its thread about is left to a
    process that can)."""
    rows = session.exec(
        select(Run, Conversation)
        .join(Conversation, Run.conversation_id == Conversation.id)  # type: ignore[arg-type]
        .where(
            Run.status.in_(UNFINISHED_RUN_STATES),  # type: ignore[attr-defined]
            Conversation.platform.in_(list(platforms) or [""]),  # type: ignore[attr-defined]
            _lease_is_dead(me, dead),
        )
        .order_by(Run.started_at)  # type: ignore[arg-type]
    ).all()
    return [(run, conv) for run, conv in rows]


def _lease_is_dead(me: str, dead: Collection[str]):  # type: ignore[no-untyped-def]
    """Unowned, owned by a gone process, or another's lease lapsed by the database's clock."""
    return or_(
        _RUN.owner.is_(None),
        _RUN.owner.in_([d for d in dead if d] or [""]),
        (_RUN.owner != me) & (_RUN.lease_until < db_now()),
    )


def claim_run(
    session: Session,
    run_id: str,
    me: str,
    *,
    seen_owner: str | None,
    lease_s: float,
    dead: Collection[str],
) -> int | None:
    """Take over `run_id` if it is still unfinished, still `seen_owner`'s, and that lease is
    still dead: the run's lease epoch rises (the fencing token of the new owner). The epoch
    this call took it at, or None when it did not."""
    owned = _RUN.owner.is_(None) if seen_owner is None else _RUN.owner == seen_owner
    statement = (
        update(Run.__table__)  # type: ignore[arg-type]
        .where(
            _RUN.id == run_id,
            _RUN.status.in_(UNFINISHED_RUN_STATES),
            owned,
            _lease_is_dead(me, dead),
        )
        .values(owner=me, lease_until=db_now(lease_s), lease_epoch=_RUN.lease_epoch + 1)
        .returning(_RUN.lease_epoch)
    )
    row = session.connection().execute(statement).first()
    return None if row is None else int(row[0])


def claim_inbox(session: Session, me: str, dead: Collection[str]) -> list[InboxEvent]:
    """Take over the unprocessed inbox events of gone processes (and unowned ones)."""
    dead_owners = [d for d in dead if d] or [""]
    where = or_(_INBOX.owner.is_(None), _INBOX.owner.in_(dead_owners))
    return _take(session, InboxEvent, where, owner=me)


def _take(session: Session, model: type[T], where: Any, **values: Any) -> list[T]:
    """UPDATE the rows `where` matches to `values` and return them (as `model`s, by id): each
    row goes to exactly one of several concurrent takers."""
    table = model.__table__  # type: ignore[attr-defined]
    statement = update(table).where(where).values(**values).returning(*table.c)
    rows = session.connection().execute(statement).mappings().all()
    return sorted((model(**row) for row in rows), key=lambda item: item.id or 0)  # type: ignore[attr-defined]


def unfinished_run_elsewhere(session: Session, conversation_id: int, me: str) -> Run | None:
    """The conversation's unfinished run that another process owns (its replies go there as
    mail), if any. The conversation row is locked first (PostgreSQL: FOR UPDATE), so two
    processes receiving the same thread's first messages start one run between them."""
    session.exec(
        select(Conversation.id).where(Conversation.id == conversation_id).with_for_update()
    ).first()
    return session.exec(
        select(Run).where(
            Run.conversation_id == conversation_id,
            Run.status.in_(LIVE_RUN_STATES),  # type: ignore[attr-defined]
            or_(_RUN.owner.is_(None), _RUN.owner != me),
        )
    ).first()


def live_run_of_thread(session: Session, key: tuple[str, str, str, str]) -> str | None:
    """The id of the thread's running or waiting run, wherever it runs (a Stop from the thread)."""
    platform, workspace, channel, root = key
    return session.exec(
        select(Run.id)
        .join(Conversation, Run.conversation_id == Conversation.id)  # type: ignore[arg-type]
        .where(
            Conversation.platform == platform,
            Conversation.workspace == workspace,
            Conversation.channel == channel,
            Conversation.root == root,
            Run.status.in_(LIVE_RUN_STATES),  # type: ignore[attr-defined]
        )  # fmt: skip
        .order_by(Run.started_at.desc())  # type: ignore[attr-defined]
    ).first()


def add_mail(session: Session, mail: RunMail) -> RunMail:
    session.add(mail)
    session.flush()
    return mail


def take_mail(session: Session, run_ids: Sequence[str], me: str) -> list[RunMail]:
    """Take the untaken replies of these runs (each one by exactly one taker), oldest first."""
    if not run_ids:
        return []
    where = _MAIL.run_id.in_(run_ids) & _MAIL.taken_by.is_(None)
    return _take(session, RunMail, where, taken_by=me)


def run_is_unfinished(session: Session, run_id: str) -> bool:
    row = session.connection().execute(select(_RUN.status).where(_RUN.id == run_id)).first()
    return row is not None and row[0] in LIVE_RUN_STATES
