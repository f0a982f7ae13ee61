"""Queries of the answers beyond yes or no: an approver's edit of the call (then their approval
of it) and a request for changes. Each takes its session; run them through `Database.run`.
Like `bot.storage.approval_queries`, every change is conditional, so the first answer wins.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import update
from sqlmodel import Session

from bot.statuses import ApprovalStatus
from bot.storage.approval_queries import (
    add_decision,
    conclude_approval,
    get_approval,
    tally_approvals,
)
from bot.storage.models import Approval, ApprovalDecision, Conversation
from bot.storage.outbox import queue_approval
from bot.storage.queries import core_update

_APPROVAL = Approval.__table__.c  # type: ignore[attr-defined]


def edit_approval(
    session: Session,
    approval_id: str,
    *,
    base_fingerprint: str,
    arguments: dict[str, Any],
    fingerprint: str,
    editor: str,
) -> bool:
    """Make a still-pending approval name the edited call, if it still names the call the
    editor edited (`base_fingerprint`); the model's call is kept from the first edit on. A
    grant is no longer offered (it would cover the model's arguments). True if it changed."""
    row = get_approval(session, approval_id)
    if row is None or row.status != ApprovalStatus.PENDING or row.fingerprint != base_fingerprint:
        return False
    values: dict[str, Any] = {"arguments": arguments, "fingerprint": fingerprint,
                              "edited_by": editor, "grant_fingerprint": ""}  # fmt: skip
    if not row.model_fingerprint:
        values.update(model_arguments=row.arguments, model_fingerprint=row.fingerprint)
    statement = (
        update(Approval.__table__)  # type: ignore[arg-type]
        .where(
            _APPROVAL.id == approval_id,
            _APPROVAL.status == ApprovalStatus.PENDING,
            _APPROVAL.fingerprint == base_fingerprint,
        )
        .values(**values)
    )
    changed = core_update(session, statement) == 1
    if changed:
        queue_approval(session, approval_id, edited=True)  # the audit sinks hear of the edit
    return changed


def approve_edited(
    session: Session,
    decision: ApprovalDecision,
    *,
    base_fingerprint: str,
    arguments: dict[str, Any],
) -> tuple[bool, bool, list[str], Approval | None]:
    """`edit_approval`, the editor's approval of the edited call (`decision.fingerprint`),
    committed, then the tally, in one hop: (edited, won, approvers, row). Not edited: the
    call changed or ended meanwhile, nothing was recorded."""
    edited = edit_approval(
        session, decision.approval_id, base_fingerprint=base_fingerprint,
        arguments=arguments, fingerprint=decision.fingerprint, editor=decision.user_id,
    )  # fmt: skip
    row = get_approval(session, decision.approval_id)
    if not edited or row is None:
        return False, False, [], row
    add_decision(session, decision)
    session.commit()
    won, approvers, row = tally_approvals(session, row, grant_by=None, reason=decision.reason)
    return True, won, approvers, row


def request_changes(
    session: Session, approval_id: str, user_id: str, guidance: str
) -> tuple[bool, Approval | None]:
    """End a still-pending approval with the approver's guidance instead of the call (first
    answer wins); record their answer if it won."""
    won = conclude_approval(
        session, approval_id, ApprovalStatus.CHANGES_REQUESTED, decided_by=[user_id],
        reason=guidance,
    )  # fmt: skip
    if won:
        add_decision(
            session,
            ApprovalDecision(approval_id=approval_id, user_id=user_id,
                             decision="request_changes", reason=guidance),
        )  # fmt: skip
    return won, get_approval(session, approval_id)


def conversation_of(session: Session, conversation_id: int) -> Conversation | None:
    return session.get(Conversation, conversation_id)
