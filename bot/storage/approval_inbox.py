"""The query behind approvers' inboxes: pending approvals on one platform, with who answered.

Kept apart from `approval_queries` (the decisions' transitions): this one only reads, and is
asked each time someone's list is shown (Slack's App Home, Feishu's `pending`, the console).
"""

from __future__ import annotations

from datetime import datetime

from sqlmodel import Session, col, select

from bot.clock import as_utc
from bot.statuses import ApprovalStatus
from bot.storage.models import Approval, ApprovalDecision


def pending_on_platform(
    session: Session, platform: str, *, now: datetime, limit: int
) -> list[tuple[Approval, set[str]]]:
    """Pending approvals whose card is on `platform` and whose deadline is still ahead,
    oldest first, each with the people who answered it already (a quorum's recorded
    approvals)."""
    rows = list(
        session.exec(
            select(Approval)
            .where(
                Approval.status == ApprovalStatus.PENDING,
                Approval.card_platform == platform,
            )
            .order_by(col(Approval.created_at), col(Approval.id))
            .limit(limit)
        ).all()
    )
    rows = [row for row in rows if as_utc(row.expires_at) > now]  # SQLite keeps no zone
    if not rows:
        return []
    answered: dict[str, set[str]] = {row.id: set() for row in rows}
    for approval_id, user_id in session.exec(
        select(ApprovalDecision.approval_id, ApprovalDecision.user_id).where(
            col(ApprovalDecision.approval_id).in_(list(answered))
        )
    ).all():
        answered[approval_id].add(user_id)
    return [(row, answered[row.id]) for row in rows]
