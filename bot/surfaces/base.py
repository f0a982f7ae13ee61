"""The Surface protocol: what the runtime asks of a chat platform, the view models it passes,
and the ports a surface is given.

A surface is a translator. Inbound it verifies, deduplicates and parses platform events into
`InboundMessage` and hands them to its ports (the inbox, or `dispatch`); outbound it renders
these view models into the platform's markup (pure functions) and posts or edits them. A surface
never sees the runtime: `SurfacePorts` holds the few things it may call, built by the runtime.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, Protocol

from bot.clock import utcnow

if TYPE_CHECKING:  # the ports' message types (their modules import this one)
    from bot.approvals.types import CardClick, Decision, DecisionResult
    from bot.audit.model import AuditChatReply, AuditReport, Place
    from bot.runs.inbox import DecisionRecord
    from bot.runs.types import DispatchOutcome, RunEvent
    from bot.surfaces.controls import FeedbackClick, StopRequest, StopResult

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
    """One step of a run: a line of the classic checklist, a task (or two) of a plan.

    `key`: a stable id (the tool call's); `arguments` and `output`: the call's arguments and
    its observation, summarised and redacted; `approval`: "" when none was asked, "waiting",
    or how it ended (approved, rejected, expired, cancelled), the wait being a task of its own.
    """

    label: str
    state: StepState
    elapsed_s: float | None = None
    detail: str = ""
    key: str = ""
    arguments: str = ""
    output: str = ""
    approval: str = ""


@dataclass(frozen=True, kw_only=True)
class StepLineStyle:
    """How one platform's markup writes a status step (the line itself is `step_line`'s):
    its icons, its escaping and cutting, the label's form and where the detail goes."""

    icons: Mapping[str, str]
    no_icon: str = ""
    escape: Callable[[str], str]
    cut: Callable[[str, int], str]
    label: str = "{}"  # the escaped label goes in the braces
    detail: str  # the escaped, cut detail goes in the braces
    detail_chars: int


def step_line(step: StatusStep, style: StepLineStyle) -> str:
    """One checklist line: icon, label, elapsed seconds, then the detail (if any)."""
    icon = style.icons.get(step.state, style.no_icon)
    line = f"{icon} {style.label.format(style.escape(step.label))}"
    if step.elapsed_s is not None:
        line += f" ({step.elapsed_s:.1f}s)"
    if step.detail:
        line += style.detail.format(style.escape(style.cut(step.detail, style.detail_chars)))
    return line


@dataclass(frozen=True)
class StatusView:
    """The one status message of a run, as the reporter wants it shown now.

    `run_id`, `requester` and `title` (the request, cut): who the run is for, for a surface
    that tracks it natively (Slack's agent session) and for the Stop button, shown while the
    run is `live`.
    """

    state: RunState
    steps: tuple[StatusStep, ...] = ()
    headline: str = ""
    totals: str = ""
    run_id: str = ""
    requester: str = ""
    title: str = ""

    @property
    def live(self) -> bool:
        """Still working (or waiting for a human): the run can be stopped."""
        return self.state in ("running", "waiting_approval") and bool(self.run_id)


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


class AuditReportPoster(Protocol):
    """A surface that posts a scheduled audit report into one of its channels."""

    async def post_audit_report(self, channel: str, report: AuditReport) -> object: ...


class Surface(Protocol):
    """One chat platform as the runtime sees it."""

    platform: str
    # how scheduled audit reports reach this platform's channels (Slack, Feishu: the surface
    # itself); None for a surface without channels (the console)
    report_poster: AuditReportPoster | None
    # the least time between two edits of one status message; None: the run manager's (one a
    # second, for the chat platforms' rate limits); the console takes every step at once (0)
    status_edit_interval_s: float | None

    async def post_status(self, thread: ThreadRef, view: StatusView) -> MessageRef: ...

    async def update_status(self, ref: MessageRef, view: StatusView) -> None: ...

    async def post_approval_card(self, thread: ThreadRef, view: ApprovalCardView) -> MessageRef: ...

    async def update_approval_card(self, ref: MessageRef, view: ApprovalCardView) -> None: ...

    async def post_answer(
        self,
        thread: ThreadRef,
        markdown: str,
        *,
        files: Sequence[AnswerFile] = (),
        feedback_run: str = "",
    ) -> MessageRef:
        """The answer in the thread, with its documents attached (files, or console links).
        With `feedback_run` the answer carries thumbs up/down for that run, and the ref is the
        message that carries them (the last one of a long answer); else the first message."""
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


# --- the ports a surface is given (built by the runtime, `Runtime.surface_ports`) ---------------


class Decisions(Protocol):
    """The decisions port (the approval broker): decide for a verified clicker, or say why not
    before asking them more; the card of an approval as it stands."""

    async def decide(
        self,
        approval_id: str,
        user_id: str,
        decision: Decision,
        reason: str = "",
        *,
        platform: str,
        grantees: list[str] | None = None,
        click: CardClick | None = None,
    ) -> DecisionResult: ...

    async def refusal(
        self,
        approval_id: str,
        user_id: str,
        decision: Decision,
        *,
        platform: str,
        click: CardClick | None = None,
    ) -> DecisionResult | None: ...

    async def view(self, approval_id: str) -> ApprovalCardView | None: ...


class InboxPort(Protocol):
    """Where a surface stores a message or a click before acknowledging it (`bot.runs.inbox`);
    its workers dispatch and decide from there."""

    def route_messages(
        self, platform: str, handler: Callable[[InboundMessage, int], Awaitable[None]]
    ) -> None: ...

    async def accept_message(self, message: InboundMessage) -> bool: ...

    async def accept_decision(self, record: DecisionRecord) -> asyncio.Future[DecisionResult]: ...

    async def accept_feedback(self, click: FeedbackClick) -> None: ...

    async def done(self, inbox_id: int) -> None: ...

    async def wait_idle(self, timeout: float) -> None: ...  # noqa: ASYNC109 - like the inbox's


# A message to the run manager: a new run, an interrupt of the active one, or nothing (the
# inbox's row id when it came through the inbox)
Dispatch = Callable[["InboundMessage", "int | None"], Awaitable["DispatchOutcome"]]
# A chat audit command (user, text, where it was asked): the reply, or None when the text is no
# audit command (the agent gets it)
AuditCommand = Callable[[str, str, "Place"], Awaitable["AuditChatReply | None"]]
# Stop a run (`RunManager.stop_request`): who may is checked there, from the request's verified
# user and the run the message belongs to
Stop = Callable[["StopRequest"], Awaitable["StopResult"]]


@dataclass(frozen=True)
class BotStatus:
    """What the web console shows about the bot itself."""

    llm_configured: bool
    model: str
    tools: tuple[str, ...] = ()
    surfaces: tuple[str, ...] = ()
    skipped_connectors: tuple[str, ...] = ()
    connectors_down: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True, kw_only=True)
class SurfacePorts:
    """Everything a surface may call, and nothing else: never the runtime.

    `dispatch`: hand a message to the run manager; `inbox`: store events before the ack;
    `decisions`: the approval broker; `audit`: answer a chat audit command; `register`: route
    this platform's runs (and cards) to the surface; `listen`: see every run's events (the
    console's live stream); `status`: what the console shows about the bot; `stop`: a person
    pressed Stop.
    """

    dispatch: Dispatch
    inbox: InboxPort
    decisions: Decisions
    audit: AuditCommand
    stop: Stop
    register: Callable[[Surface], None]
    listen: Callable[[Callable[[str, RunEvent], Awaitable[None] | None]], None]
    status: Callable[[], BotStatus]
