"""The approval card's view model, built from its row, and the sentences cards and clickers read.

Cards show exactly what would run: the row's arguments hide only known secrets (masked before
the row was written); values the redaction heuristic merely suspects are shown and listed in
`secret_looking`, so the approver sees them and knows to look twice.
"""

from __future__ import annotations

import json
from typing import cast

from bot.redaction import secret_looking
from bot.store import Approval
from bot.surfaces.base import ApprovalCardView, ApprovalState, Risk


def requesters_of(row: Approval) -> list[str]:
    """Everyone the approved call is made for (rows written before the list: the starter)."""
    return list(row.requesters) or ([row.requester] if row.requester else [])


def card_view(row: Approval, *, approvals_so_far: int | None = None) -> ApprovalCardView:
    """The card for an approval row."""
    so_far = len(row.decided_by) if approvals_so_far is None else approvals_so_far
    return ApprovalCardView(
        approval_id=row.id,
        tool_name=row.tool_name,
        connector=row.connector,
        action=row.action,
        risk=cast(Risk, row.risk if row.risk in ("low", "medium", "high") else "medium"),
        requester=row.requester,
        requesters=tuple(requesters_of(row)),
        reason=row.reason,
        arguments=json.dumps(row.arguments, indent=2, sort_keys=True, default=str),
        secret_looking=tuple(secret_looking(row.arguments)),
        approvers=tuple(row.approvers),
        min_approvals=row.min_approvals,
        approvals_so_far=so_far if row.status in ("pending", "approved") else 0,
        state=cast(ApprovalState, row.status),
        decided_by=tuple(row.decided_by),
        decision_reason=row.decision_reason,
        expires_at=row.expires_at,
        grant_ttl_s=row.grant_ttl_s if row.grant_fingerprint else None,
        grant_vary=tuple(row.grant_vary),
    )


def describe_outcome(row: Approval) -> str:
    """One sentence for a late clicker: what happened to this approval, and who decided."""
    who = ", ".join(row.decided_by)
    if row.status == "approved":
        return f"Already approved by {who}."
    if row.status == "rejected":
        reason = f": {row.decision_reason}" if row.decision_reason else "."
        return f"Already rejected by {who}{reason}"
    if row.status == "expired":
        return "This request expired without a decision."
    if row.status == "cancelled":
        return "This request was cancelled (the run stopped)."
    return "This request is still waiting for a decision."
