"""Queries over the tables of `bot.storage.models`: each takes its session and stays short.

Run them through `Database.run` (a worker thread, one committed session per call). The
"combined steps" at the end do in one session what always goes together, so a run pays one
thread hop per step rather than one per statement. Conditional UPDATEs (`transition_run`,
`reopen_run_if_unblocked`) are the race-safe transitions: the row count says who won. Approval,
decision and grant queries are in `bot.storage.approval_queries`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, insert, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, select

from bot.clock import utcnow
from bot.statuses import LIVE_RUN_STATES, ApprovalStatus, RunStatus
from bot.storage import leases as lease_queries
from bot.storage.calls import add_call, append_call, calls_for_run, complete_call, recorded_call
from bot.storage.dbclock import db_now
from bot.storage.fencing import Fence
from bot.storage.inbox import (
    add_inbox_events,
    delete_inbox_event,
    dialect_insert,
    inbox_events,
    mention_pending,
)
from bot.storage.limits import PersonalCap, PersonalLimitReached, admit
from bot.storage.models import (
    Approval,
    Conversation,
    Message,
    ProcessedEvent,
    Run,
    RunMail,
    new_id,
)

__all__ = [  # the call log's and the inbox's queries live in their own modules
    "LIVE_RUN_STATES",
    "Fence",
    "add_call",
    "add_inbox_events",
    "append_call",
    "calls_for_run",
    "complete_call",
    "delete_inbox_event",
    "inbox_events",
    "recorded_call",
]

# Rows built on the event loop get their defaults here: pydantic inspects a default factory's
# signature each time it calls it (~0.5 ms of the loop per Approval).


def new_message(**values: Any) -> Message:
    return Message(created_at=utcnow(), **values)


def new_run(**values: Any) -> Run:
    return Run(id=new_id(), started_at=utcnow(), **values)


def mark_event_processed(session: Session, event_id: str, platform: str = "") -> bool:
    """Record a platform event id; False when it was already there (a retry or re-push)."""
    try:
        with session.begin_nested():
            session.add(ProcessedEvent(event_id=event_id, platform=platform))
    except IntegrityError:
        return False
    return True


def prune_processed_events(session: Session, before: datetime, limit: int) -> int:
    """Delete at most `limit` dedupe rows recorded before `before` (the oldest first); the
    count deleted. Bounded, so one prune never holds the table for long."""
    oldest = (
        select(ProcessedEvent.event_id)
        .where(ProcessedEvent.created_at < before)
        .order_by(ProcessedEvent.created_at)  # type: ignore[arg-type]
        .limit(limit)
    )
    ids = list(session.exec(oldest).all())
    if ids:
        session.execute(delete(ProcessedEvent).where(ProcessedEvent.event_id.in_(ids)))  # type: ignore[attr-defined]
    return len(ids)


def find_conversation(
    session: Session, platform: str, workspace: str, channel: str, root: str
) -> Conversation | None:
    return session.exec(
        select(Conversation).where(
            Conversation.platform == platform,
            Conversation.workspace == workspace,
            Conversation.channel == channel,
            Conversation.root == root,
        )
    ).first()


def get_or_create_conversation(
    session: Session, platform: str, workspace: str, channel: str, root: str, direct: bool = False
) -> Conversation:
    """The thread's conversation, made if it is new (`create_conversation`)."""
    found = find_conversation(session, platform, workspace, channel, root)
    if found is not None:
        return found
    return create_conversation(session, platform, workspace, channel, root, direct)


def create_conversation(
    session: Session, platform: str, workspace: str, channel: str, root: str, direct: bool = False
) -> Conversation:
    """The thread's conversation, inserted unless it exists (`open_conversation`)."""
    return open_conversation(session, platform, workspace, channel, root, direct)[0]


def open_conversation(
    session: Session, platform: str, workspace: str, channel: str, root: str, direct: bool = False
) -> tuple[Conversation, bool]:
    """The thread's conversation, and whether this transaction made it: the insert skips a
    row that is there already (ON CONFLICT DO NOTHING on the unique key; made earlier, or by
    another transaction at the same moment), and that one is read instead. One statement for
    a new thread, two for a known one; no savepoint."""
    made = session.scalars(
        dialect_insert(session, Conversation)
        .values(
            platform=platform, workspace=workspace, channel=channel, root=root, direct=direct,
            created_at=utcnow(),
        )
        .on_conflict_do_nothing()
        .returning(Conversation)
    ).first()  # fmt: skip
    if made is not None:
        return made, True
    found = find_conversation(session, platform, workspace, channel, root)
    assert found is not None  # the insert skipped it: it is committed, so it is there
    return found, False


def get_conversation(session: Session, conversation_id: int) -> Conversation | None:
    return session.get(Conversation, conversation_id)


def add_message(session: Session, message: Message) -> Message:
    session.add(message)
    session.flush()
    return message


def thread_history(
    session: Session, conversation_id: int, *, before_id: int | None = None, limit: int = 100
) -> list[Message]:
    """The latest `limit` messages of a thread before `before_id`, oldest first."""
    query = select(Message).where(Message.conversation_id == conversation_id)
    if before_id is not None:
        query = query.where(Message.id < before_id)
    rows = session.exec(query.order_by(Message.id.desc()).limit(limit)).all()  # type: ignore[union-attr]
    return list(reversed(rows))


def add_run(session: Session, run: Run, lease_s: float | None = None) -> Run:
    """Store a run in one Core INSERT (the ORM's unit of work adds nothing here); with
    `lease_s`, its owner's lease starts now by the database's clock, in the same statement.
    Unset (None) columns are left out, so they are NULL as the ORM would store them."""
    values: dict[str, Any] = {
        column.name: value for column in _RUN if (value := getattr(run, column.name)) is not None
    }
    if lease_s is not None:
        values["lease_until"] = db_now(lease_s)
    session.connection().execute(insert(Run.__table__).values(values))  # type: ignore[arg-type]
    return run


def get_run(session: Session, run_id: str) -> Run | None:
    return session.get(Run, run_id)


def run_trace_parent(session: Session, run_id: str) -> str | None:
    """The run's stored W3C `traceparent` (None: not traced, or no such run)."""
    return session.exec(select(Run.trace_parent).where(Run.id == run_id)).first()


def core_update(session: Session, statement: Any) -> int:
    """A plain (Core) UPDATE: no ORM bookkeeping, which these hot paths do not need."""
    return session.connection().execute(statement).rowcount


_RUN = Run.__table__.c  # type: ignore[attr-defined]


def update_run(session: Session, run_id: str, *, fence: Fence | None = None, **values: Any) -> bool:
    """Update the run; with `fence`, only while that process holds it at that lease epoch
    (the fence that keeps a run advanced by one process). False when no row changed."""
    statement = update(Run.__table__).where(_RUN.id == run_id)  # type: ignore[arg-type]
    if fence is not None:
        statement = statement.where(*fence.where())
    return core_update(session, statement.values(**values)) == 1


def replies_after(session: Session, conversation_id: int, after_id: int) -> list[Message]:
    """The replies stored for a thread's run after message `after_id` (`pinned`: a reply to
    a run, read by it as an interrupt), oldest first."""
    return list(
        session.exec(
            select(Message)
            .where(
                Message.conversation_id == conversation_id,
                Message.role == "user",
                Message.pinned == True,  # noqa: E712 - SQL, not Python
                Message.id > after_id,  # type: ignore[operator]
            )
            .order_by(Message.id)  # type: ignore[arg-type]
        ).all()
    )


def request_message_id(session: Session, run: Run) -> int | None:
    """The thread message that asked for `run`: an adopted run that never checkpointed starts
    again with the history before it. A run of an older version names none: its request is
    the last user message stored by its start, by the clock of the host that stored it."""
    if run.request_message_id is not None:
        return run.request_message_id
    return session.exec(
        select(Message.id)
        .where(
            Message.conversation_id == run.conversation_id,
            Message.role == "user",
            Message.created_at <= run.started_at,  # type: ignore[operator]
        )
        .order_by(Message.id.desc())  # type: ignore[union-attr]
    ).first()


def transition_run(
    session: Session,
    run_id: str,
    status: RunStatus,
    *,
    current: tuple[RunStatus, ...],
    unless_stopped: bool = False,
    fence: Fence | None = None,
    **values: Any,
) -> bool:
    """Move a run to `status` only from one of `current` (and, `unless_stopped`, only if
    nobody pressed Stop; with `fence`, only while that process holds the run at that lease
    epoch); True if
    this call made the move.

    Every ending goes through here, so a run has one outcome: of a process finishing it and a
    start-up failing it (or two endings racing in one process) exactly one wins, and only the
    winner tells the thread.
    """
    where = [_RUN.id == run_id, _RUN.status.in_(current)]
    if unless_stopped:
        where.append(_RUN.stopped_by.is_(None))
    if fence is not None:
        where.extend(fence.where())
    statement = (
        update(Run.__table__)  # type: ignore[arg-type]
        .where(*where)
        .values(status=status, **values)
    )
    return core_update(session, statement) == 1


def reopen_run_if_unblocked(session: Session, run_id: str) -> bool:
    """`waiting_approval` -> `running`, unless another approval of the run is still pending."""
    pending = (
        select(Approval.id)
        .where(Approval.run_id == run_id, Approval.status == ApprovalStatus.PENDING)
        .exists()
    )
    statement = (
        update(Run.__table__)  # type: ignore[arg-type]
        .where(_RUN.id == run_id, _RUN.status == RunStatus.WAITING_APPROVAL, ~pending)
        .values(status=RunStatus.RUNNING)
    )
    return core_update(session, statement) == 1


# --- combined steps: one session (one worker-thread hop) for what always goes together ---------


def accept_inbound(
    session: Session,
    event_id: str,
    key: tuple[str, str, str, str],
    *,
    mentions_bot: bool,
    direct: bool = False,
    inbox_id: int | None = None,
    wait_for_mention: bool = False,
    opening: Opening | None = None,
) -> tuple[str, Conversation | None]:
    """Dedupe + conversation: ("duplicate" | "ignored" | "wait" | "ok" | "started",
    conversation). An event from the inbox was deduplicated when it was stored; one that is
    ignored leaves the inbox here. `wait_for_mention`: a reply to a thread not known yet whose
    mention waits in an inbox says "wait" (its row stays) instead of being ignored. `opening`:
    when the mention opens a new thread, its message and run are stored in this same
    transaction ("started"; past its author's cap, nothing of it: "ok", and the usual way
    stores the message and refuses the run)."""
    if inbox_id is None and event_id and not mark_event_processed(session, event_id, key[0]):
        return "duplicate", None
    if mentions_bot:  # the insert first: a mention most often opens a thread (one statement)
        conv, made = open_conversation(session, *key, direct=direct)
        if made and opening is not None and _admitted(session, opening.cap):
            _open_with_run(session, conv, opening, inbox_id)
            return "started", conv
        return "ok", conv  # past its author's cap: the usual way stores it and refuses the run
    conv = find_conversation(session, *key)
    if conv is None:
        if inbox_id is not None:
            if wait_for_mention and mention_pending(session, key, inbox_id):
                return "wait", None
            delete_inbox_event(session, inbox_id)
        return "ignored", None
    return "ok", conv


@dataclass(frozen=True)
class Opening:
    """A mention's message and the run it starts, for a thread that may be new: stored with
    the thread's conversation when this transaction makes it (`accept_inbound`)."""

    message: Message
    run: Run
    lease_s: float | None
    cap: PersonalCap | None


def _admitted(session: Session, cap: PersonalCap | None) -> bool:
    """`admit`, as a yes or no: it only reads (and locks the person) before it refuses, so
    the transaction goes on either way."""
    try:
        if cap is not None:
            admit(session, cap)
    except PersonalLimitReached:
        return False
    return True


def _open_with_run(
    session: Session, conv: Conversation, opening: Opening, inbox_id: int | None
) -> None:
    """A thread made in this transaction has no run anywhere yet, so its first message and run
    go in with it (admitted by its author's cap): no lock on the thread and no look for
    another process's run (`add_message_and_run`)."""
    opening.message.conversation_id = opening.run.conversation_id = conv.id  # type: ignore[assignment]
    add_message_and_run(
        session, opening.message, opening.run, inbox_id, opening.lease_s, new_thread=True
    )


def add_message_and_run(
    session: Session,
    message: Message,
    run: Run | None,
    inbox_id: int | None = None,
    lease_s: float | None = None,
    *,
    cap: PersonalCap | None = None,
    new_thread: bool = False,
) -> tuple[Message, Run | None, RunMail | None]:
    """Store a thread message (and the run it starts); its inbox row goes in the same commit.

    A run to start is started only if no other process owns an unfinished run of the thread
    (the conversation row locked meanwhile): then the message goes to that run as mail
    instead, and the mail row comes back in place of the run. `cap`: the run's requester may
    have at most so many unfinished runs (every process's); past it `PersonalLimitReached` is
    raised and nothing is stored. `new_thread`: the thread was made in this transaction, so
    no process can own a run of it (nothing to lock or look for).
    """
    mail: RunMail | None = None
    other = None
    if run is not None and run.owner is not None and not new_thread:
        other = lease_queries.unfinished_run_elsewhere(session, run.conversation_id, run.owner)
    if other is None and run is not None and cap is not None:
        admit(session, cap)
    if other is not None:
        message.pinned = True  # a reply a run reads, as a local interrupt is
    add_message(session, message)
    if other is not None:
        mail = lease_queries.add_mail(
            session,
            RunMail(
                run_id=other.id, message_id=message.id or 0, author=message.author,
                text=message.text,
            ),
        )  # fmt: skip
        run = None
    elif run is not None:
        run.request_message_id = message.id
        add_run(session, run, lease_s)
    if inbox_id is not None:
        delete_inbox_event(session, inbox_id)
    return message, run, mail


def finish_run(
    session: Session,
    run_id: str,
    reply: Message | None,
    *,
    status: RunStatus,
    current: tuple[RunStatus, ...] = LIVE_RUN_STATES,
    **values: Any,
) -> bool:
    """End a run (status, usage, finished_at) if it is still in `current`, storing the reply
    message with it; False (and nothing stored) when the run had already ended."""
    won = transition_run(session, run_id, status, current=current, finished_at=utcnow(), **values)
    if won and reply is not None:
        add_message(session, reply)
    return won
