"""Queries over the tables of `bot.store`: each takes its session and stays short.

Run them through `bot.db.Database.run` (a worker thread, one committed session per call). The
"combined steps" at the end do in one session what always goes together, so a run pays one
thread hop per step rather than one per statement. Conditional UPDATEs (`conclude_approval`,
`transition_run`) are the race-safe transitions: the row count says who won.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import delete, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, select

from bot.clock import utcnow
from bot.store import (
    Approval,
    ApprovalDecision,
    Conversation,
    Message,
    ProcessedEvent,
    Run,
    ThreadGrant,
    new_id,
)
from bot.store_calls import add_call, append_call, calls_for_run, complete_call, recorded_call
from bot.store_inbox import add_inbox_events, delete_inbox_event, inbox_events

__all__ = [  # the call log's and the inbox's queries live in their own modules
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


def new_approval(**values: Any) -> Approval:
    return Approval(id=new_id(), created_at=utcnow(), decided_by=[], **values)


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
    session: Session, platform: str, workspace: str, channel: str, root: str
) -> Conversation:
    """The thread's conversation; two first messages at once still make one row (unique key)."""
    found = find_conversation(session, platform, workspace, channel, root)
    if found is not None:
        return found
    try:
        with session.begin_nested():
            conv = Conversation(platform=platform, workspace=workspace, channel=channel, root=root)
            session.add(conv)
        return conv
    except IntegrityError:
        found = find_conversation(session, platform, workspace, channel, root)
        if found is None:
            raise
        return found


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


def add_run(session: Session, run: Run) -> Run:
    session.add(run)
    session.flush()
    return run


def get_run(session: Session, run_id: str) -> Run | None:
    return session.get(Run, run_id)


def _core_update(session: Session, statement: Any) -> int:
    """A plain (Core) UPDATE: no ORM bookkeeping, which these hot paths do not need."""
    return session.connection().execute(statement).rowcount


_RUN = Run.__table__.c  # type: ignore[attr-defined]
_APPROVAL = Approval.__table__.c  # type: ignore[attr-defined]


def update_run(session: Session, run_id: str, **values: Any) -> None:
    _core_update(session, update(Run.__table__).where(_RUN.id == run_id).values(**values))  # type: ignore[arg-type]


LIVE_RUN_STATES = ("running", "waiting_approval")


def transition_run(
    session: Session, run_id: str, status: str, *, current: tuple[str, ...], **values: Any
) -> bool:
    """Move a run to `status` only from one of `current`; True if this call made the move.

    Every ending goes through here, so a run has one outcome: of a process finishing it and a
    start-up failing it (or two endings racing in one process) exactly one wins, and only the
    winner tells the thread.
    """
    statement = (
        update(Run.__table__)  # type: ignore[arg-type]
        .where(_RUN.id == run_id, _RUN.status.in_(current))
        .values(status=status, **values)
    )
    return _core_update(session, statement) == 1


def reopen_run_if_unblocked(session: Session, run_id: str) -> bool:
    """`waiting_approval` -> `running`, unless another approval of the run is still pending."""
    pending = (
        select(Approval.id).where(Approval.run_id == run_id, Approval.status == "pending").exists()
    )
    statement = (
        update(Run.__table__)  # type: ignore[arg-type]
        .where(_RUN.id == run_id, _RUN.status == "waiting_approval", ~pending)
        .values(status="running")
    )
    return _core_update(session, statement) == 1


def runs_with_status(session: Session, *statuses: str) -> list[tuple[Run, Conversation]]:
    rows = session.exec(
        select(Run, Conversation)
        .join(Conversation, Run.conversation_id == Conversation.id)  # type: ignore[arg-type]
        .where(Run.status.in_(statuses))  # type: ignore[attr-defined]
        .order_by(Run.started_at)  # type: ignore[arg-type]
    ).all()
    return [(run, conv) for run, conv in rows]


def add_approval(session: Session, approval: Approval) -> tuple[Approval, bool]:
    """Insert a pending approval; (existing, False) when one exists for the same tool call."""
    try:
        with session.begin_nested():
            session.add(approval)
        return approval, True
    except IntegrityError:
        found = find_approval(session, approval.run_id, approval.tool_call_id)
        if found is None:
            raise
        return found, False


def find_approval(session: Session, run_id: str, tool_call_id: str) -> Approval | None:
    return session.exec(
        select(Approval).where(Approval.run_id == run_id, Approval.tool_call_id == tool_call_id)
    ).first()


def get_approval(session: Session, approval_id: str) -> Approval | None:
    return session.get(Approval, approval_id)


def update_approval(session: Session, approval_id: str, **values: Any) -> None:
    statement = update(Approval.__table__).where(_APPROVAL.id == approval_id).values(**values)  # type: ignore[arg-type]
    _core_update(session, statement)


def conclude_approval(
    session: Session,
    approval_id: str,
    status: str,
    *,
    decided_by: list[str],
    reason: str = "",
    thread_grant: bool = False,
) -> bool:
    """The one race-safe transition: only a still-pending row changes; True if this call won."""
    statement = (
        update(Approval.__table__)  # type: ignore[arg-type]
        .where(_APPROVAL.id == approval_id, _APPROVAL.status == "pending")
        .values(
            status=status,
            decided_by=decided_by,
            decision_reason=reason,
            thread_grant=thread_grant,
            decided_at=utcnow(),
        )
    )
    return _core_update(session, statement) == 1


def add_decision(session: Session, decision: ApprovalDecision) -> bool:
    """One answer per person and approval; False when this person already answered."""
    try:
        with session.begin_nested():
            session.add(decision)
    except IntegrityError:
        return False
    return True


def decisions_for(session: Session, approval_id: str) -> list[ApprovalDecision]:
    return list(
        session.exec(
            select(ApprovalDecision)
            .where(ApprovalDecision.approval_id == approval_id)
            .order_by(ApprovalDecision.id)  # type: ignore[arg-type]
        ).all()
    )


def pending_approvals_for_run(session: Session, run_id: str) -> list[Approval]:
    return list(
        session.exec(
            select(Approval).where(Approval.run_id == run_id, Approval.status == "pending")
        ).all()
    )


def find_thread_grant(session: Session, conversation_id: int, tool_name: str) -> ThreadGrant | None:
    return session.exec(
        select(ThreadGrant).where(
            ThreadGrant.conversation_id == conversation_id, ThreadGrant.tool_name == tool_name
        )
    ).first()


def add_thread_grant(session: Session, grant: ThreadGrant) -> None:
    """Grant once per (conversation, tool); a second grant for the same pair is a no-op."""
    try:
        with session.begin_nested():
            session.add(grant)
    except IntegrityError:
        return


# --- combined steps: one session (one worker-thread hop) for what always goes together ---------


def accept_inbound(
    session: Session,
    event_id: str,
    key: tuple[str, str, str, str],
    *,
    mentions_bot: bool,
    inbox_id: int | None = None,
) -> tuple[str, Conversation | None]:
    """Dedupe + conversation: ("duplicate" | "ignored" | "ok", conversation). An event from
    the inbox was deduplicated when it was stored; one that is ignored leaves the inbox here."""
    if inbox_id is None and event_id and not mark_event_processed(session, event_id, key[0]):
        return "duplicate", None
    conv = find_conversation(session, *key)
    if conv is None:
        if not mentions_bot:
            if inbox_id is not None:
                delete_inbox_event(session, inbox_id)
            return "ignored", None
        conv = get_or_create_conversation(session, *key)
    return "ok", conv


def add_message_and_run(
    session: Session, message: Message, run: Run | None, inbox_id: int | None = None
) -> tuple[Message, Run | None]:
    """Store a thread message (and the run it starts); its inbox row goes in the same commit."""
    add_message(session, message)
    if run is not None:
        add_run(session, run)
    if inbox_id is not None:
        delete_inbox_event(session, inbox_id)
    return message, run


def approval_lookup(
    session: Session, run_id: str, tool_call_id: str, conversation_id: int, tool_name: str
) -> tuple[Approval | None, ThreadGrant | None]:
    """The gate's first question: an approval for this call already, or a thread grant?"""
    existing = find_approval(session, run_id, tool_call_id)
    if existing is not None:
        return existing, None
    return None, find_thread_grant(session, conversation_id, tool_name)


def open_approval(session: Session, approval: Approval) -> tuple[Approval, bool]:
    """Insert (or find) the approval and put its run in `waiting_approval`."""
    row, created = add_approval(session, approval)
    transition_run(session, approval.run_id, "waiting_approval", current=("running",))
    return row, created


def record_card(session: Session, approval_id: str, **card: Any) -> Approval | None:
    """Remember where the card lives; returns the row as it is now."""
    update_approval(session, approval_id, **card)
    return get_approval(session, approval_id)


def reject(
    session: Session, approval_id: str, user_id: str, reason: str
) -> tuple[bool, Approval | None]:
    """Reject if still pending (first answer wins); record the rejecter's answer if it won."""
    won = conclude_approval(session, approval_id, "rejected", decided_by=[user_id], reason=reason)
    if won:
        add_decision(
            session,
            ApprovalDecision(
                approval_id=approval_id, user_id=user_id, decision="reject", reason=reason
            ),
        )
    return won, get_approval(session, approval_id)


def tally_approvals(
    session: Session, approval: Approval, *, grant_by: str | None, reason: str
) -> tuple[bool, list[str], Approval | None]:
    """Count distinct approvers; at quorum, approve (conditionally) and maybe grant the thread.

    Runs after the approver's own answer was committed, so of two concurrent last approvers
    at least one sees both answers.
    """
    approvers = list(
        dict.fromkeys(
            d.user_id for d in decisions_for(session, approval.id) if d.decision == "approve"
        )
    )
    won = False
    if len(approvers) >= approval.min_approvals:
        won = conclude_approval(
            session,
            approval.id,
            "approved",
            decided_by=approvers,
            reason=reason,
            thread_grant=grant_by is not None,
        )
        if won and grant_by is not None:
            add_thread_grant(
                session,
                ThreadGrant(
                    conversation_id=approval.conversation_id,
                    tool_name=approval.tool_name,
                    granted_by=grant_by,
                    approval_id=approval.id,
                ),
            )
    return won, approvers, get_approval(session, approval.id)


def approve(
    session: Session,
    decision: ApprovalDecision,
    approval: Approval,
    *,
    grant_by: str | None,
    reason: str,
) -> tuple[bool, bool, list[str], Approval | None]:
    """`add_decision`, committed, then `tally_approvals`, in one worker-thread hop:
    (first time, won, approvers, row). The commit in between keeps the tally's guarantee."""
    first_time = add_decision(session, decision)
    session.commit()
    won, approvers, row = tally_approvals(session, approval, grant_by=grant_by, reason=reason)
    return first_time, won, approvers, row


def finish_run(
    session: Session,
    run_id: str,
    reply: Message | None,
    *,
    status: str,
    current: tuple[str, ...] = LIVE_RUN_STATES,
    **values: Any,
) -> bool:
    """End a run (status, usage, finished_at) if it is still in `current`, storing the reply
    message with it; False (and nothing stored) when the run had already ended."""
    won = transition_run(session, run_id, status, current=current, finished_at=utcnow(), **values)
    if won and reply is not None:
        add_message(session, reply)
    return won
