"""The Surface protocol: what the runtime asks of a chat platform, and the view models it passes.

A surface is a translator. Inbound it verifies, deduplicates and parses platform events into
`InboundMessage` and calls `RunManager.dispatch`; outbound it renders these view models into the
platform's markup (pure functions) and posts or edits them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, Protocol

from bot.clock import utcnow

StepState = Literal["running", "waiting_approval", "done", "failed", "blocked"]
RunState = Literal["running", "waiting_approval", "done", "failed", "cancelled"]
ApprovalState = Literal["pending", "approved", "rejected", "expired", "cancelled"]
Risk = Literal["low", "medium", "high"]


@dataclass(frozen=True)
class ThreadRef:
    """A conversation's key: Slack (team, channel, thread_ts or ts); Feishu (tenant, chat, root)."""

    platform: str
    workspace: str
    channel: str
    root: str


@dataclass(frozen=True)
class MessageRef:
    """Where a message the bot posted lives, so it can be edited in place."""

    thread: ThreadRef
    message_id: str


@dataclass(frozen=True, kw_only=True)
class InboundMessage:
    """One user message, already verified and parsed by its surface."""

    thread: ThreadRef
    event_id: str
    user_id: str
    text: str
    message_id: str = ""
    mentions_bot: bool = True
    direct: bool = False  # a direct message to the bot (only this user sees the conversation)
    received_at: datetime = field(default_factory=utcnow)


@dataclass(frozen=True)
class StatusStep:
    """One line of the status checklist."""

    label: str
    state: StepState
    elapsed_s: float | None = None
    detail: str = ""


@dataclass(frozen=True)
class StatusView:
    """The one status message of a run, as the reporter wants it shown now."""

    state: RunState
    steps: tuple[StatusStep, ...] = ()
    headline: str = ""
    totals: str = ""


@dataclass(frozen=True, kw_only=True)
class ApprovalCardView:
    """An approval card: what will run, why, and (once ended) the outcome and who decided.

    `reason` and `arguments` are untrusted text (the model wrote them): renderers show them as
    plain text that no markup in them can escape. `arguments` hide only known secrets; the
    paths in `secret_looking` are shown as sent and marked "looks like a secret".
    `requesters`: everyone the call is made for (four-eyes refuses each). `grant_ttl_s`: how
    long "approve for this thread" would last; None when it is not offered.
    """

    approval_id: str
    tool_name: str
    connector: str
    action: str
    risk: Risk
    requester: str
    reason: str
    arguments: str
    requesters: tuple[str, ...] = ()
    secret_looking: tuple[str, ...] = ()
    approvers: tuple[str, ...] = ()
    min_approvals: int = 1
    approvals_so_far: int = 0
    state: ApprovalState = "pending"
    decided_by: tuple[str, ...] = ()
    decision_reason: str = ""
    expires_at: datetime | None = None
    grant_ttl_s: float | None = None
    grant_vary: tuple[str, ...] = ()
    # plain-text lines about the policy: the manifest rule that set it (and its reason), the
    # escalation tiers reached; shown on every copy of the card
    notes: tuple[str, ...] = ()
    # on a copy routed away from the thread (an approvals channel, a DM): the thread's link
    thread_link: str = ""

    def __post_init__(self) -> None:
        if not self.requesters and self.requester:
            object.__setattr__(self, "requesters", (self.requester,))


@dataclass(frozen=True)
class CardPlace:
    """Where a routed copy of an approval card goes: an approvals channel (`target` its id) or
    one approver's direct messages (`target` the user id), in `workspace`."""

    kind: Literal["channel", "dm"]
    workspace: str
    target: str


def describe_duration(seconds: float) -> str:
    """`900` -> "15 min", `7200` -> "2 h", `45` -> "45 s" (cards say how long a grant lasts)."""
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{seconds / 3600:g} h"
    if seconds >= 60:
        return f"{seconds / 60:g} min"
    return f"{seconds:g} s"


def grant_note(view: ApprovalCardView) -> str:
    """What "approve for this thread" would allow, in one sentence (plain text)."""
    if view.grant_ttl_s is None:
        return ""
    who = ", ".join(view.requesters) or "the requester"
    same = "these same arguments"
    if view.grant_vary:
        same += f" (except {', '.join(view.grant_vary)}, which may differ)"
    return (
        f"Approve for this thread: for {describe_duration(view.grant_ttl_s)}, {view.tool_name} "
        f"with {same} may run again in this thread without asking, when requested by {who} "
        "(or the people you name)."
    )


def grant_button_label(view: ApprovalCardView) -> str:
    """The label of the "approve for this thread" button, with how long a grant lasts."""
    return f"Approve for this thread ({describe_duration(view.grant_ttl_s or 0)})"


@dataclass(frozen=True)
class AnswerFile:
    """A document attached to an answer (a tool's HTML or Markdown artifact)."""

    name: str
    content_type: str
    text: str

    @property
    def data(self) -> bytes:
        return self.text.encode("utf-8")


class Surface(Protocol):
    """One chat platform as the runtime sees it."""

    platform: str

    async def post_status(self, thread: ThreadRef, view: StatusView) -> MessageRef: ...

    async def update_status(self, ref: MessageRef, view: StatusView) -> None: ...

    async def post_approval_card(self, thread: ThreadRef, view: ApprovalCardView) -> MessageRef: ...

    async def update_approval_card(self, ref: MessageRef, view: ApprovalCardView) -> None: ...

    async def post_answer(
        self, thread: ThreadRef, markdown: str, *, files: Sequence[AnswerFile] = ()
    ) -> MessageRef:
        """The answer in the thread, with its documents attached (files, or console links)."""
        ...

    async def post_notice(
        self, thread: ThreadRef, text: str, *, mention: Sequence[str] = ()
    ) -> MessageRef:
        """A short note in the thread (run failed, escalation reminder mentioning approvers)."""
        ...

    async def notify_user(self, thread: ThreadRef, user_id: str, text: str) -> None:
        """Tell one user something privately (Slack ephemeral, Feishu toast or DM)."""
        ...

    async def thread_link(self, thread: ThreadRef) -> str:
        """A link to the thread, for a card copy posted elsewhere ('' when there is none)."""
        ...

    async def post_approval_copy(self, place: CardPlace, view: ApprovalCardView) -> MessageRef:
        """A copy of an approval card in an approvals channel or an approver's DM; the ref
        names where it really landed (a DM's channel)."""
        ...

    async def post_routed_notice(
        self, thread: ThreadRef, places: Sequence[CardPlace]
    ) -> MessageRef:
        """In the thread: the approval waits elsewhere ("waiting for approval in #approvals")."""
        ...
