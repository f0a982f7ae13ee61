"""The web console's conversations, kept server-side: every item a thread shows, in order, and
the events that changed them, numbered so a browser resumes exactly where it stopped.

`save_item` is the one writer: in one transaction it takes the next number of the
`console_sequence` row (its row lock makes every writer, in every process, take numbers in
commit order and without gaps), stores the item with that number as its `seq`, and updates the
thread's sidebar row. So "every change after event N" is `seq > N`: a reader that has seen N has
seen everything before it. `ConsoleStore` runs these queries off the event loop and is the
console's port onto them (built by the runtime; the console never imports storage).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from bot.clock import as_utc, utcnow
from bot.statuses import ApprovalStatus
from bot.storage.database import Database
from bot.storage.feedback import ratings_by
from bot.storage.models import ConsoleItem, ConsoleSequence, ConsoleThread, Conversation, Run

TITLE_CHARS = 80


@dataclass(frozen=True)
class StoredItem:
    """An item as stored: `seq` its latest event id, `position` its place in the thread."""

    id: str
    root: str
    kind: str
    state: str
    data: dict[str, Any]
    seq: int
    position: int
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class ThreadInfo:
    """A conversation as the sidebar lists it."""

    root: str
    title: str
    state: str
    pending: int
    seq: int
    created_at: datetime
    updated_at: datetime
    hidden: bool = False


def _item(row: ConsoleItem) -> StoredItem:
    return StoredItem(
        id=row.id,
        root=row.root,
        kind=row.kind,
        state=row.state,
        data=dict(row.data or {}),
        seq=row.seq,
        position=row.position,
        created_at=as_utc(row.created_at),
        updated_at=as_utc(row.updated_at),
    )


def _thread(row: ConsoleThread) -> ThreadInfo:
    return ThreadInfo(
        root=row.root,
        title=row.title,
        state=row.state,
        pending=row.pending,
        seq=row.seq,
        created_at=as_utc(row.created_at),
        updated_at=as_utc(row.updated_at),
        hidden=bool(row.hidden),
    )


def next_seq(session: Session) -> int:
    """The next event id; the counter row stays locked until this transaction ends."""
    table = ConsoleSequence.__table__  # type: ignore[attr-defined]
    bumped = session.connection().execute(
        update(table).where(table.c.id == 1).values(value=table.c.value + 1)
    )
    if bumped.rowcount == 0:  # a schema made without the migration's first row
        try:
            with session.begin_nested():
                session.add(ConsoleSequence(id=1, value=0))
        except IntegrityError:
            pass  # another writer made it first
        return next_seq(session)
    return int(session.exec(select(ConsoleSequence.value).where(ConsoleSequence.id == 1)).one())


def current_seq(session: Session) -> int:
    """The latest event id given out (0 before the first)."""
    value = session.exec(select(ConsoleSequence.value).where(ConsoleSequence.id == 1)).first()
    return int(value or 0)


def save_item(
    session: Session,
    item_id: str,
    root: str,
    kind: str,
    data: dict[str, Any],
    *,
    state: str = "",
    title: str = "",
    create_only: bool = False,
) -> tuple[StoredItem, ThreadInfo] | None:
    """Create or change an item (and its thread's row) as the next event; None, with nothing
    written, when `create_only` and the item exists (a message sent twice)."""
    seq = next_seq(session)  # first: the lock orders this whole transaction
    now = utcnow()
    row = session.get(ConsoleItem, item_id)
    if row is None:
        row = ConsoleItem(
            id=item_id, root=root, kind=kind, state=state, data=data, seq=seq, position=seq,
            created_at=now, updated_at=now,
        )  # fmt: skip
        session.add(row)
    elif create_only:
        session.rollback()  # nothing happened: not even the number is used
        return None
    else:
        row.data, row.state, row.seq, row.updated_at = data, state, seq, now
    thread = session.get(ConsoleThread, root)
    if thread is None:
        thread = ConsoleThread(root=root, created_at=now)
        session.add(thread)
    if title and not thread.title:
        thread.title = " ".join(title.split())[:TITLE_CHARS]
    if kind == "status":
        thread.state = state
    thread.seq, thread.updated_at = seq, now
    session.flush()
    if kind == "approval":
        thread.pending = _pending(session, root)
        session.flush()
    return _item(row), _thread(thread)


def _pending(session: Session, root: str) -> int:
    """Approval cards of the thread still waiting (distinct approvals: copies count once)."""
    rows = session.exec(
        select(ConsoleItem.data).where(
            ConsoleItem.root == root,
            ConsoleItem.kind == "approval",
            ConsoleItem.state == ApprovalStatus.PENDING,
        )
    ).all()
    return len({(data or {}).get("approval_id") for data in rows})


def items_since(session: Session, cursor: int, limit: int) -> list[StoredItem]:
    """Items whose latest change came after event `cursor`, in event order."""
    rows = session.exec(
        select(ConsoleItem).where(ConsoleItem.seq > cursor).order_by(ConsoleItem.seq).limit(limit)  # type: ignore[arg-type]
    ).all()
    return [_item(row) for row in rows]


def thread_items(session: Session, root: str, limit: int) -> list[StoredItem]:
    """The latest `limit` items of a thread, in thread order."""
    rows = session.exec(
        select(ConsoleItem)
        .where(ConsoleItem.root == root)
        .order_by(ConsoleItem.position.desc())  # type: ignore[attr-defined]
        .limit(limit)
    ).all()
    return [_item(row) for row in reversed(rows)]


def get_item(session: Session, item_id: str) -> StoredItem | None:
    row = session.get(ConsoleItem, item_id)
    return _item(row) if row is not None else None


def get_thread(session: Session, root: str) -> ThreadInfo | None:
    """A conversation the console shows (None: none, or deleted in the console)."""
    row = session.get(ConsoleThread, root)
    return _thread(row) if row is not None and not row.hidden else None


def list_threads(session: Session, limit: int, hidden: tuple[str, ...] = ()) -> list[ThreadInfo]:
    """Conversations, the one changed last first (`hidden` roots and the ones deleted in the
    console left out)."""
    query = select(ConsoleThread).where(ConsoleThread.hidden == False)  # noqa: E712
    if hidden:
        query = query.where(ConsoleThread.root.not_in(hidden))  # type: ignore[attr-defined]
    rows = session.exec(query.order_by(ConsoleThread.seq.desc()).limit(limit)).all()  # type: ignore[attr-defined]
    return [_thread(row) for row in rows]


def rename_thread(session: Session, root: str, title: str) -> ThreadInfo | None:
    """A conversation's new title (None: no such conversation, or deleted)."""
    row = session.get(ConsoleThread, root)
    if row is None or row.hidden:
        return None
    row.title = " ".join(title.split())[:TITLE_CHARS]
    session.flush()
    return _thread(row)


def hide_thread(session: Session, root: str) -> ThreadInfo | None:
    """Delete a conversation from the console: it is no longer listed or opened. Only the
    flag changes: its items, runs and call-log rows are kept (None: no such conversation)."""
    row = session.get(ConsoleThread, root)
    if row is None or row.hidden:
        return None
    row.hidden = True
    session.flush()
    return _thread(row)


def approval_items(session: Session, *, pending: bool, limit: int) -> list[StoredItem]:
    """Approval cards still pending (oldest first), or decided ones (latest decision first); a
    batch card (`approval_batch`) is pending while any call of it waits."""
    query = select(ConsoleItem).where(col(ConsoleItem.kind).in_(("approval", "approval_batch")))
    waiting = ConsoleItem.state == ApprovalStatus.PENDING
    if pending:
        query = query.where(waiting).order_by(ConsoleItem.position)  # type: ignore[arg-type]
    else:
        query = query.where(~waiting).order_by(ConsoleItem.seq.desc())  # type: ignore[attr-defined]
    return [_item(row) for row in session.exec(query.limit(limit)).all()]


def run_root(session: Session, run_id: str, platform: str) -> str | None:
    """The thread root of a run made on `platform`, or None (another platform's, or unknown)."""
    return session.exec(
        select(Conversation.root)
        .join(Run, Run.conversation_id == Conversation.id)  # type: ignore[arg-type]
        .where(Run.id == run_id, Conversation.platform == platform)
    ).first()


class ConsoleStore:
    """The console's port onto these queries (each call one worker-thread hop).

    `shared`: other processes may write the same store (PostgreSQL), so a reader also looks
    for their events now and then instead of relying on this process's own alone.
    """

    def __init__(self, db: Database, *, platform: str = "console") -> None:
        self._db = db
        self._platform = platform
        self.shared = db.engine.dialect.name != "sqlite"

    async def save(
        self,
        item_id: str,
        root: str,
        kind: str,
        data: dict[str, Any],
        *,
        state: str = "",
        title: str = "",
        create_only: bool = False,
    ) -> tuple[StoredItem, ThreadInfo] | None:
        return await self._db.run(
            save_item, item_id, root, kind, data, state=state, title=title,
            create_only=create_only,
        )  # fmt: skip

    async def cursor(self) -> int:
        return await self._db.run(current_seq)

    async def since(self, cursor: int, limit: int = 500) -> list[StoredItem]:
        return await self._db.run(items_since, cursor, limit)

    async def items(self, root: str, limit: int = 1000) -> list[StoredItem]:
        return await self._db.run(thread_items, root, limit)

    async def item(self, item_id: str) -> StoredItem | None:
        return await self._db.run(get_item, item_id)

    async def thread(self, root: str) -> ThreadInfo | None:
        return await self._db.run(get_thread, root)

    async def threads(self, limit: int = 200, hidden: tuple[str, ...] = ()) -> list[ThreadInfo]:
        return await self._db.run(list_threads, limit, hidden)

    async def approvals(self, *, pending: bool, limit: int = 100) -> list[StoredItem]:
        return await self._db.run(approval_items, pending=pending, limit=limit)

    async def run_root(self, run_id: str) -> str | None:
        return await self._db.run(run_root, run_id, self._platform)

    async def rename(self, root: str, title: str) -> ThreadInfo | None:
        return await self._db.run(rename_thread, root, title)

    async def hide(self, root: str) -> ThreadInfo | None:
        return await self._db.run(hide_thread, root)

    async def ratings(self, run_ids: Sequence[str], user_id: str) -> dict[str, str]:
        return await self._db.run(ratings_by, run_ids, user_id)
