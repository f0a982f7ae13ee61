"""Who may decide an approval, and how: the rules the broker checks server-side on every answer.

Pure functions over the approval row (nothing a card carried is trusted): the answer must come
from the platform the card was posted on, from a listed approver (or anyone, when none are
listed), never from a requester under four-eyes, and "approve for this thread" only where the
row allows a grant. `already` and `grantees` are the small answers that go with them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from bot.approval_cards import card_view, describe_outcome, requesters_of
from bot.approval_types import MAX_GRANTEES, Decision, DecisionResult
from bot.store import Approval

NOT_FOUND = DecisionResult("not_found", "This approval request no longer exists.")


def resolve_approvers(groups: Mapping[str, list[str]], approvers: Sequence[str]) -> set[str]:
    """User ids named directly or through `CHATOPS_APPROVER_GROUPS`."""
    users: set[str] = set()
    for name in approvers:
        users.update(groups.get(name, [name]))
    return users


def may_decide(groups: Mapping[str, list[str]], user_id: str, row: Approval) -> bool:
    """Empty approvers means anyone who can see the card; otherwise only the listed ones."""
    return not row.approvers or user_id in resolve_approvers(groups, row.approvers)


def wrong_platform(row: Approval, platform: str) -> DecisionResult | None:
    """A refusal unless the answer comes from the platform the card was posted on (a user id
    means nothing on another platform, and the console's is typed by whoever uses it)."""
    if row.card_platform == platform:
        return None
    where = row.card_platform or "no chat yet"
    return DecisionResult(
        "wrong_platform", f"This approval was posted in {where}; decide it there."
    )


def refusal(
    row: Approval, user_id: str, decision: Decision, groups: Mapping[str, list[str]]
) -> DecisionResult | None:
    """Why this person may not answer this (still pending) approval this way, or None."""
    if row.status != "pending":
        return already(row)
    if not may_decide(groups, user_id, row):
        return DecisionResult("unauthorized", "You are not one of the approvers for this action.")
    approving = decision in ("approve", "approve_thread")
    if approving and not row.allow_self_approval and user_id in requesters_of(row):
        return DecisionResult(
            "self_approval_refused",
            "You asked for this action (your message is part of the request), so someone else "
            "must approve it (four-eyes rule).",
        )
    if decision == "approve_thread" and not row.grant_fingerprint:
        return DecisionResult(
            "grant_refused",
            "This action cannot be approved for the thread (it needs more than one approver or "
            "someone other than the requester): approve this call alone.",
        )
    return None


def grantees(row: Approval, named: Sequence[str] | None) -> list[str]:
    """Who a grant covers: the people the granter named, else everyone who asked."""
    people = [str(p).strip()[:64] for p in named or () if str(p).strip()]
    return list(dict.fromkeys(people or requesters_of(row)))[:MAX_GRANTEES]


def already(row: Approval) -> DecisionResult:
    return DecisionResult("already_decided", describe_outcome(row), card_view(row))
