"""Queries of approvals, their decisions and grants: each takes its session and stays short.

Run them through `Database.run`. `conclude_approval` is the race-safe transition (only a
still-pending row changes; the row count says who won); `approve` and `reject` do in one session
what always goes together, so a decision pays one worker-thread hop.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, select

from bot.clock import utcnow
from bot.statuses import ApprovalStatus, RunStatus
from bot.storage.dbclock import db_now
from bot.storage.limits import PersonalCap, admit
from bot.storage.models import (
    Approval,
    ApprovalCard,
    ApprovalDecision,
    ApprovalGrant,
    ApprovalReminder,
    new_id,
)
from bot.storage.outbox import queue_approval
from bot.storage.queries import core_update, transition_run

_APPROVAL = Approval.__table__.c  # type: ignore[attr-defined]
_DECISION = ApprovalDecision.__table__.c  # type: ignore[attr-defined]


def new_approval(**values: Any) -> Approval:
    """Defaults filled here, not by pydantic's factories (see `bot.storage.queries`)."""
    return Approval(**{"id": new_id(), "created_at": utcnow(), "decided_by": [], **values})


def add_approval(session: Session, approval: Approval) -> tuple[Approval, bool]:
    """Insert a pending approval; (existing, False) when one exists for the same tool call."""
    try:
        with session.begin_nested():
            session.add(approval)
        queue_approval(session, approval.id)  # its audit sinks' event, in this transaction
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
    """The row as the database has it now (Core UPDATEs bypass the session's copy)."""
    return session.get(Approval, approval_id, populate_existing=True)


def update_approval(session: Session, approval_id: str, **values: Any) -> None:
    statement = update(Approval.__table__).where(_APPROVAL.id == approval_id).values(**values)  # type: ignore[arg-type]
    core_update(session, statement)


def conclude_approval(
    session: Session,
    approval_id: str,
    status: ApprovalStatus,
    *,
    decided_by: list[str],
    reason: str = "",
    thread_grant: bool = False,
    fingerprint: str | None = None,
) -> bool:
    """The one race-safe transition: only a still-pending row changes; True if this call won.
    `fingerprint`: only while the row still names this call (an approval reaching its quorum
    must not conclude a call an approver edited meanwhile)."""
    conditions = [_APPROVAL.id == approval_id, _APPROVAL.status == ApprovalStatus.PENDING]
    if fingerprint is not None:
        conditions.append(_APPROVAL.fingerprint == fingerprint)
    statement = (
        update(Approval.__table__)  # type: ignore[arg-type]
        .where(*conditions)
        .values(
            status=status,
            decided_by=decided_by,
            decision_reason=reason,
            thread_grant=thread_grant,
            decided_at=utcnow(),
        )
    )
    won = core_update(session, statement) == 1
    if won:
        queue_approval(session, approval_id)  # how it ended, for the audit sinks
    return won


def add_decision(session: Session, decision: ApprovalDecision) -> bool:
    """One answer per person and approval; False when this person already answered. An
    approver who approved the call before an edit approves again: their row then names the
    edited call (`fingerprint`), and counts for it."""
    try:
        with session.begin_nested():
            session.add(decision)
    except IntegrityError:
        if decision.decision != "approve" or not decision.fingerprint:
            return False
        statement = (
            update(ApprovalDecision.__table__)  # type: ignore[arg-type]
            .where(
                _DECISION.approval_id == decision.approval_id,
                _DECISION.user_id == decision.user_id,
                _DECISION.decision == "approve",
                _DECISION.fingerprint != decision.fingerprint,
            )
            .values(fingerprint=decision.fingerprint, reason=decision.reason, decided_at=utcnow())
        )
        return core_update(session, statement) == 1
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
            select(Approval).where(
                Approval.run_id == run_id, Approval.status == ApprovalStatus.PENDING
            )
        ).all()
    )


def decided_approvals_of_runs(session: Session, run_ids: Sequence[str]) -> list[Approval]:
    """The decided (no longer pending) approvals of these runs: what a poll wakes waiters for."""
    if not run_ids:
        return []
    return list(
        session.exec(
            select(Approval).where(
                Approval.run_id.in_(run_ids),  # type: ignore[attr-defined]
                Approval.status != ApprovalStatus.PENDING,
            )
        ).all()
    )


def mark_reminded(session: Session, approval_id: str) -> bool:
    """Record the one reminder; False when it was already sent (by any process)."""
    statement = (
        update(Approval.__table__)  # type: ignore[arg-type]
        .where(_APPROVAL.id == approval_id, _APPROVAL.escalated.is_(False))
        .values(escalated=True)
    )
    return core_update(session, statement) == 1


def answered_by(session: Session, approval_id: str) -> set[str]:
    """Who answered an approval already (an approval recorded under a quorum, a rejection)."""
    return {d.user_id for d in decisions_for(session, approval_id)}


def claim_reminder(session: Session, approval_id: str, user_id: str) -> bool:
    """Claim the one reminder of `user_id` about an approval; False when it was claimed already
    (before a restart, or by another process: the unique pair decides, in the database)."""
    try:
        with session.begin_nested():
            session.add(ApprovalReminder(approval_id=approval_id, user_id=user_id))
    except IntegrityError:
        return False
    return True


def reminded_users(session: Session, approval_id: str) -> list[str]:
    return list(
        session.exec(
            select(ApprovalReminder.user_id)
            .where(ApprovalReminder.approval_id == approval_id)
            .order_by(ApprovalReminder.id)  # type: ignore[arg-type]
        ).all()
    )


def approvals_for_run(session: Session, run_id: str) -> list[Approval]:
    """Every approval a run asked for, whatever became of it."""
    return list(session.exec(select(Approval).where(Approval.run_id == run_id)).all())


def live_grants(
    session: Session, conversation_id: int, tool_name: str, fingerprint: str
) -> list[ApprovalGrant]:
    """The conversation's unexpired grants of this tool and scope fingerprint, newest first
    (whether one covers the call is `bot.approvals.grants.judge`'s to say)."""
    if not fingerprint:
        return []
    return list(
        session.exec(
            select(ApprovalGrant)
            .where(
                ApprovalGrant.conversation_id == conversation_id,
                ApprovalGrant.tool_name == tool_name,
                ApprovalGrant.fingerprint == fingerprint,
                ApprovalGrant.expires_at > db_now(),  # type: ignore[operator]
            )
            .order_by(ApprovalGrant.created_at.desc())  # type: ignore[attr-defined]
        ).all()
    )


def approval_lookup(
    session: Session,
    run_id: str,
    tool_call_id: str,
    conversation_id: int,
    tool_name: str,
    *,
    grant_fingerprint: str,
) -> tuple[Approval | None, list[ApprovalGrant]]:
    """The gate's first question: an approval for this call already, or the live grants that
    may cover it? (`grant_fingerprint` empty: grants do not apply to this tool.)"""
    existing = find_approval(session, run_id, tool_call_id)
    if existing is not None:
        return existing, []
    return None, live_grants(session, conversation_id, tool_name, grant_fingerprint)


def open_approval(
    session: Session, approval: Approval, *, per_person: int | None = None
) -> tuple[Approval, bool]:
    """Insert (or find) the approval and put its run in `waiting_approval`.

    `per_person`: a new approval is admitted only while its requester has fewer pending
    approvals (every process's); past it `PersonalLimitReached` is raised and nothing changes.
    The one a resumed run asks for again is found, never counted twice.
    """
    new = find_approval(session, approval.run_id, approval.tool_call_id) is None
    if per_person is not None and new:
        cap = PersonalCap("approvals", approval.requester, per_person)
        admit(session, cap, now=approval.created_at)
    row, created = add_approval(session, approval)
    transition_run(
        session, approval.run_id, RunStatus.WAITING_APPROVAL, current=(RunStatus.RUNNING,)
    )
    return row, created


def add_card_copy(session: Session, copy: ApprovalCard, *, primary: bool) -> Approval | None:
    """Record one copy of a card (once: a copy recorded again is left as it is); the `primary`
    copy is also the row's `card_*` (the first one posted). Returns the row as it is now."""
    try:
        with session.begin_nested():
            session.add(copy)
    except IntegrityError:
        pass
    if primary:
        update_approval(
            session,
            copy.approval_id,
            card_workspace=copy.workspace,
            card_channel=copy.channel,
            card_root=copy.root,
            card_message_id=copy.message_id,
        )
    return get_approval(session, copy.approval_id)


def add_card_copies(session: Session, copies: Sequence[ApprovalCard]) -> list[Approval | None]:
    """Record the one card several approvals share (a batch card), each copy the row's primary
    one, in ONE transaction: a reader sees either none of them on the card or all of them, so
    "Approve all" never decides part of what the card showed. The rows as they are now."""
    for copy in copies:
        add_card_copy(session, copy, primary=True)
    return [get_approval(session, copy.approval_id) for copy in copies]


def card_copies(session: Session, approval_id: str) -> list[ApprovalCard]:
    return list(
        session.exec(
            select(ApprovalCard)
            .where(ApprovalCard.approval_id == approval_id)
            .order_by(ApprovalCard.id)  # type: ignore[arg-type]
        ).all()
    )


def approval_with_copies(
    session: Session, approval_id: str
) -> tuple[Approval | None, list[ApprovalCard]]:
    """The row and every copy of its card, in one hop (a click is checked against them)."""
    row = get_approval(session, approval_id)
    return row, card_copies(session, approval_id) if row is not None else []


def escalate_approval(
    session: Session, approval_id: str, *, level: int, to_level: int, approvers: list[str]
) -> tuple[bool, Approval | None]:
    """Apply escalation tiers `level`..`to_level - 1` of a still-pending approval: its eligible
    approvers become `approvers`. Conditional on the level, so of two processes (or a click and
    the waiter) exactly one applies a tier."""
    statement = (
        update(Approval.__table__)  # type: ignore[arg-type]
        .where(
            _APPROVAL.id == approval_id,
            _APPROVAL.status == ApprovalStatus.PENDING,
            _APPROVAL.escalation_level == level,
        )
        .values(escalation_level=to_level, approvers=approvers)
    )
    won = core_update(session, statement) == 1
    return won, get_approval(session, approval_id)


def reject(
    session: Session, approval_id: str, user_id: str, reason: str
) -> tuple[bool, Approval | None]:
    """Reject if still pending (first answer wins); record the rejecter's answer if it won."""
    won = conclude_approval(
        session, approval_id, ApprovalStatus.REJECTED, decided_by=[user_id], reason=reason
    )
    if won:
        add_decision(
            session,
            ApprovalDecision(
                approval_id=approval_id, user_id=user_id, decision="reject", reason=reason
            ),
        )
    return won, get_approval(session, approval_id)


def tally_approvals(
    session: Session,
    approval: Approval,
    *,
    grant_by: str | None,
    grantees: Sequence[str] = (),
    reason: str,
) -> tuple[bool, list[str], Approval | None]:
    """Count distinct approvers of the call as it stands (its fingerprint: an edit resets the
    tally); at quorum, approve (conditionally) and maybe grant the thread.

    Runs after the approver's own answer was committed, so of two concurrent last approvers
    at least one sees both answers. A grant is recorded only by the call that won, only where
    the approval allows one (`grant_fingerprint`), for `grantees`, until its TTL runs out,
    recording the rule the approval's policy came from and its approvers (bound to its rule).
    """
    approval = get_approval(session, approval.id) or approval  # as it stands (an edit?)
    approvers = list(
        dict.fromkeys(
            d.user_id
            for d in decisions_for(session, approval.id)
            if d.decision == "approve" and d.fingerprint == approval.fingerprint
        )
    )
    granting = grant_by is not None and bool(approval.grant_fingerprint) and bool(grantees)
    won = False
    if len(approvers) >= approval.min_approvals:
        won = conclude_approval(
            session,
            approval.id,
            ApprovalStatus.APPROVED,
            decided_by=approvers,
            reason=reason,
            thread_grant=granting,
            fingerprint=approval.fingerprint,
        )
        if won and granting and grant_by is not None:
            # set and judged by the database's clock, as leases are: a grant lasts its time
            # on every process, whatever the clock of the host that made it or reads it
            session.add(
                ApprovalGrant(
                    id=new_id(),
                    conversation_id=approval.conversation_id,
                    tool_name=approval.tool_name,
                    fingerprint=approval.grant_fingerprint,
                    grantees=list(dict.fromkeys(grantees)),
                    granted_by=grant_by,
                    approval_id=approval.id,
                    policy_rule=approval.policy_rule,
                    approvers=list(approval.approvers),
                    created_at=db_now(),
                    expires_at=db_now(approval.grant_ttl_s),
                )
            )
    return won, approvers, get_approval(session, approval.id)


def approve(
    session: Session,
    decision: ApprovalDecision,
    approval: Approval,
    *,
    grant_by: str | None,
    grantees: Sequence[str] = (),
    reason: str,
) -> tuple[bool, bool, list[str], Approval | None]:
    """`add_decision`, committed, then `tally_approvals`, in one worker-thread hop:
    (first time, won, approvers, row). The commit in between keeps the tally's guarantee."""
    first_time = add_decision(session, decision)
    session.commit()
    won, approvers, row = tally_approvals(
        session, approval, grant_by=grant_by, grantees=grantees, reason=reason
    )
    return first_time, won, approvers, row
