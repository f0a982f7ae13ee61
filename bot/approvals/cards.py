"""Approval cards: the view model built from the row (`bot.approvals.routing` posts and edits it).

Cards show exactly what would run: the row's arguments hide only known secrets (masked before
the row was written); values the redaction heuristic merely suspects are shown and listed in
`secret_looking`, so the approver sees them and knows to look twice.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, cast

from bot.approvals.diff import describe_edit
from bot.chat.text import describe_duration
from bot.chat.threads import MessageRef, ThreadRef
from bot.chat.views import ApprovalCardView, Risk
from bot.clock import as_utc
from bot.redaction import secret_looking
from bot.statuses import ApprovalStatus
from bot.storage.models import Approval

# a card counts the approvals so far while it waits, and on the approval that reached quorum
_COUNTING = (ApprovalStatus.PENDING, ApprovalStatus.APPROVED)


def requesters_of(row: Approval) -> list[str]:
    """Everyone the approved call is made for (rows written before the list: the starter)."""
    return list(row.requesters) or ([row.requester] if row.requester else [])


def card_view(
    row: Approval, *, approvals_so_far: int | None = None, link: str = ""
) -> ApprovalCardView:
    """The card for an approval row; `link`: the requesting thread's (on a routed copy)."""
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
        arguments=json.dumps(
            row.arguments, indent=2, sort_keys=True, default=str, ensure_ascii=False
        ),
        secret_looking=tuple(secret_looking(row.arguments)),
        approvers=tuple(row.approvers),
        min_approvals=row.min_approvals,
        approvals_so_far=so_far if row.status in _COUNTING else 0,
        state=row.status,
        decided_by=tuple(row.decided_by),
        decision_reason=row.decision_reason,
        expires_at=row.expires_at,
        decided_at=as_utc(row.decided_at) if row.decided_at is not None else None,
        grant_ttl_s=row.grant_ttl_s if row.grant_fingerprint else None,
        grant_vary=tuple(row.grant_vary),
        notes=(*policy_notes(row), *edit_notes(row), *escalation_notes(row)),
        thread_link=link,
    )


def policy_notes(row: Approval) -> tuple[str, ...]:
    """What the card says about the policy: the rule that set it and why."""
    if not row.policy_rule:
        return ()
    why = f": {row.policy_reason}" if row.policy_reason else ""
    return (f"Policy: rule {row.policy_rule!r}{why}",)


def edit_notes(row: Approval) -> tuple[str, ...]:
    """What the card says about an approver's edit: who edited, and what changed."""
    if not row.model_fingerprint:
        return ()
    changes = describe_edit(row.model_arguments or {}, row.arguments)
    return (f"Edited by {row.edited_by} (the arguments above are the edited ones):\n{changes}",)


def tiers(row: Approval) -> list[dict[str, Any]]:
    return [t for t in row.escalate or () if isinstance(t, dict)]


def describe_tier(tier: Mapping[str, Any]) -> str:
    who = ", ".join(str(a) for a in tier.get("approvers") or ()) or "nobody"
    notify = f" ({tier['notify']})" if tier.get("notify") else ""
    return f"escalated to {who} after {describe_duration(float(tier['after_s']))}{notify}"


def escalation_notes(row: Approval) -> tuple[str, ...]:
    """What every copy of the card says about the ladder: each tier reached."""
    reached = tiers(row)[: row.escalation_level]
    return tuple(f"No decision: {describe_tier(tier)}." for tier in reached)


def card_ref(row: Approval) -> MessageRef | None:
    """Where the card of an approval lives, once it was posted."""
    if not row.card_message_id or not row.card_platform:
        return None
    thread = ThreadRef(
        row.card_platform, row.card_workspace or "", row.card_channel or "", row.card_root or ""
    )
    return MessageRef(thread, row.card_message_id)


def describe_outcome(row: Approval) -> str:
    """One sentence for a late clicker: what happened to this approval, and who decided."""
    who = ", ".join(row.decided_by)
    if row.status == ApprovalStatus.APPROVED:
        return f"Already approved by {who}."
    if row.status == ApprovalStatus.REJECTED:
        reason = f": {row.decision_reason}" if row.decision_reason else "."
        return f"Already rejected by {who}{reason}"
    if row.status == ApprovalStatus.EXPIRED:
        return "This request expired without a decision."
    if row.status == ApprovalStatus.CHANGES_REQUESTED:
        return f"{who} already asked for changes: {row.decision_reason}"
    if row.status == ApprovalStatus.CANCELLED:
        return "This request was cancelled (the run stopped)."
    return "This request is still waiting for a decision."
