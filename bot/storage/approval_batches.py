"""The query behind a batch card: every approval of one model response, with its tally.

Kept apart from `approval_queries` (the decisions' transitions): this one only reads, each time
a batch card is posted or edited (what it shows is always read again, never patched).
"""

from __future__ import annotations

from sqlmodel import Session, col, select

from bot.storage.models import Approval, ApprovalDecision


def batch_members(session: Session, batch_id: str) -> list[tuple[Approval, int]]:
    """The approvals of a batch in the order they were asked, each with how many people
    approved the call as it stands (a quorum's count: an edit resets it)."""
    if not batch_id:
        return []
    rows = list(
        session.exec(
            select(Approval)
            .where(Approval.batch_id == batch_id)
            .order_by(col(Approval.created_at), col(Approval.tool_call_id))
        ).all()
    )
    if not rows:
        return []
    approved: dict[str, set[str]] = {row.id: set() for row in rows}
    fingerprints = {row.id: row.fingerprint for row in rows}
    for answer in session.exec(
        select(ApprovalDecision).where(col(ApprovalDecision.approval_id).in_(list(approved)))
    ).all():
        if answer.decision == "approve" and answer.fingerprint == fingerprints[answer.approval_id]:
            approved[answer.approval_id].add(answer.user_id)
    return [(row, len(approved[row.id])) for row in rows]
