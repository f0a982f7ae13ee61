"""An approval decision as a click makes it: the card it was made on, the record the inbox keeps
before the platform is acknowledged, and what deciding did (told to the clicker).

Surfaces build these from a verified payload (the clicker from the platform, never from the
card's value); the inbox stores the record; the broker decides from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from bot.chat.threads import ThreadRef
from bot.chat.views import ApprovalCardView, BatchCardView

# approve_edited: approve the call as the approver edited it (`DecisionRecord.arguments`);
# request_changes: the call does not run, the agent gets the approver's text as guidance;
# approve_all / reject_all: every pending call of the clicked approval's batch, or none
Decision = Literal[
    "approve",
    "reject",
    "approve_thread",
    "approve_edited",
    "request_changes",
    "approve_all",
    "reject_all",
]
DecisionStatus = Literal[
    "decided",
    "recorded",
    "already_decided",
    "unauthorized",
    "self_approval_refused",
    "grant_refused",
    "wrong_platform",
    "not_found",
    "wrong_card",
    "edit_refused",
]


@dataclass(frozen=True, kw_only=True)
class CardClick:
    """Where a click on an approval card was made, as the platform's verified payload says:
    the card's message (platform, workspace or tenant, channel or chat, message id), and whether
    the clicker belongs to another organisation (Slack Connect, another Feishu tenant).
    `inbox`: the click was made in the clicker's own list of waiting approvals (Slack's App
    Home), which the platform shows to that person alone: no card message (`channel` and
    `message_id` are empty), and who may decide is judged as for any click."""

    platform: str
    workspace: str
    channel: str
    message_id: str
    external: bool = False
    inbox: bool = False


@dataclass(frozen=True, kw_only=True)
class DecisionRecord:
    """One click's decision, as the verified payload said it (the clicker from the platform)."""

    platform: str
    approval_id: str
    user_id: str
    decision: Decision
    reason: str = ""
    grantees: tuple[str, ...] = ()  # approve_thread: whom the grant covers (empty: requesters)
    reply_to: ThreadRef | None = None  # where to tell the clicker privately if refused
    card: CardClick | None = None  # the card the click was made on (None: the console)
    # approve_edited: the edited arguments (checked again when applied) and the fingerprint of
    # the call the approver edited (an edit of a call that changed meanwhile is refused)
    arguments: dict[str, Any] | None = None
    fingerprint: str = ""


@dataclass(frozen=True)
class DecisionResult:
    """What `decide()` did; `message` is for the person who clicked, `view` the card after
    (`batch`: the batch card after, when the approval's card lists its batch)."""

    status: DecisionStatus
    message: str
    view: ApprovalCardView | None = None
    batch: BatchCardView | None = None

    @property
    def card(self) -> ApprovalCardView | BatchCardView | None:
        """The card to show after: the batch's when there is one."""
        return self.batch or self.view
