"""Who may decide an approval, and how: the rules the broker checks server-side on every answer.

Pure functions over the approval row (nothing a card carried is trusted): the answer must come
from the platform the card was posted on (and a click from the card itself), from a listed
approver (or anyone, when none are listed), never from a requester under four-eyes, and
"approve for this thread" only where the row allows a grant. `already` and `grantees` are the
small answers that go with them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from bot.approvals.cards import card_view, describe_outcome, requesters_of
from bot.approvals.types import MAX_GRANTEES, ApprovalOutcome
from bot.chat.decisions import CardClick, Decision, DecisionResult
from bot.chat.text import describe_duration
from bot.chat.threads import MessageRef
from bot.statuses import ApprovalStatus
from bot.storage.models import Approval

NOT_FOUND = DecisionResult("not_found", "This approval request no longer exists.")


def resolve_approvers(groups: Mapping[str, list[str]], approvers: Sequence[str]) -> set[str]:
    """User ids named directly or through `CHATOPS_APPROVER_GROUPS`."""
    users: set[str] = set()
    for name in approvers:
        users.update(groups.get(name, [name]))
    return users


@dataclass(frozen=True)
class Approvers:
    """Who may decide in one workspace: the approver groups that apply there (its own, else
    `CHATOPS_APPROVER_GROUPS`) and its own approvers (`CHATOPS_WORKSPACES_FILE`; None: no such
    list), which narrow whatever an approval names. Who receives a card, a reminder or an
    inbox entry is read from here, as who may decide is (`refusal`)."""

    groups: Mapping[str, list[str]]
    within: Sequence[str] | None = None

    def people(self, names: Sequence[str]) -> set[str]:
        """User ids named directly or through this workspace's groups (not narrowed)."""
        return resolve_approvers(self.groups, names)

    def deciders(self, names: Sequence[str]) -> set[str] | None:
        """The user ids who may decide an approval naming `names` here; None: anyone (it names
        nobody and the workspace lists nobody)."""
        if self.within is None:
            return self.people(names) if names else None
        allowed = self.people(self.within)
        return self.people(names) & allowed if names else allowed


# the approvers of the workspace an approval's card is in (the broker's `approvers_of`)
ApproversOf = Callable[[Approval], Approvers]


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


def on_one_of(cards: Sequence[MessageRef], click: CardClick) -> bool:
    """Was the click made on one of these cards (platform, workspace, channel, message)?"""
    where = (click.platform, click.workspace, click.channel, click.message_id)
    return any(
        (card.thread.platform, card.thread.workspace, card.thread.channel, card.message_id) == where
        for card in cards
    )


def wrong_card(
    row: Approval,
    cards: Sequence[MessageRef],
    click: CardClick,
    user_id: str,
    groups: Mapping[str, list[str]],
) -> DecisionResult | None:
    """A click decides only on a copy of the approval's own card (a forged or replayed payload
    naming another approval's id is refused), and an external user only if named as an
    approver. Every copy (the thread's, an approvals channel's, a DM's) counts alike: who may
    decide is checked the same way whichever copy was clicked. A click in the clicker's own
    inbox (`CardClick.inbox`) stands for a copy, in the workspace the card was posted in."""
    if click.inbox:
        if (row.card_workspace or "") not in ("", click.workspace):
            message = "This approval belongs to another workspace, so nothing was decided."
            return DecisionResult("wrong_card", message)
    elif not on_one_of(cards, click):
        message = "This button is not on this approval's card, so nothing was decided."
        return DecisionResult("wrong_card", message)
    if click.external and user_id not in resolve_approvers(groups, row.approvers):
        message = (
            "You are not a member of this workspace: only approvers the connector's "
            "manifest names may decide here."
        )
        return DecisionResult("unauthorized", message)
    return None


def refusal(
    row: Approval,
    user_id: str,
    decision: Decision,
    groups: Mapping[str, list[str]],
    *,
    within: Sequence[str] | None = None,
) -> DecisionResult | None:
    """Why this person may not answer this (still pending) approval this way, or None.
    `within`: the workspace's approvers (`CHATOPS_WORKSPACES_FILE`), who alone may decide
    there, whatever the row names (None: no such list)."""
    if row.status != ApprovalStatus.PENDING:
        return already(row)
    if within is not None and user_id not in resolve_approvers(groups, within):
        return DecisionResult(
            "unauthorized", "You are not one of this workspace's approvers, so nothing was decided."
        )
    if not may_decide(groups, user_id, row):
        return DecisionResult("unauthorized", "You are not one of the approvers for this action.")
    approving = decision in ("approve", "approve_thread", "approve_edited")
    # a requester naming an approver group (a trigger's on-call group) stands for each member
    asked = resolve_approvers(groups, requesters_of(row))
    if approving and not row.allow_self_approval and user_id in asked:
        return DecisionResult(
            "self_approval_refused",
            "You asked for this action (your message, or your on-call group's alert, is part of "
            "the request), so someone else must approve it (four-eyes rule).",
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


def approved(row: Approval, grantees: Sequence[str] | None) -> str:
    """What the approver is told once their answer approved the call (and maybe granted)."""
    if not grantees:
        return "Approved. The action will run now."
    return (
        f"Approved for this thread: for {describe_duration(row.grant_ttl_s)} the same call may "
        f"run again when requested by {', '.join(grantees)}, while it falls under the same "
        "approval rule and you remain one of its approvers."
    )


def outcome(row: Approval) -> ApprovalOutcome:
    """How an approval ended, as its waiting gate needs it."""
    return ApprovalOutcome(
        approval_id=row.id,
        status=row.status,
        decided_by=tuple(row.decided_by),
        reason=row.decision_reason,
        thread_grant=row.thread_grant,
        arguments=dict(row.arguments) if row.model_fingerprint else None,
        model_arguments=dict(row.model_arguments or {}) if row.model_fingerprint else None,
        edited_by=row.edited_by,
    )
