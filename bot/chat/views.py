"""The view models: what the services ask a surface to show, in no platform's markup.

A run's status message (`StatusView` of `StatusStep`s), an approval card (`ApprovalCardView`)
and where its routed copies go (`CardPlace`), the documents an answer carries (`AnswerFile`)
and what the web console shows about the bot (`BotStatus`). Each surface renders them with pure
functions; nothing here knows a platform.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from bot.statuses import LIVE_RUN_STATES, ApprovalStatus, RunStatus

StepState = Literal["running", "waiting_approval", "done", "failed", "blocked"]
# the state a run's status message shows (not the engine's `bot.engine.state.RunState`)
# (one being answered still shows as running)
StatusState = Literal[
    RunStatus.RUNNING, RunStatus.WAITING_APPROVAL, RunStatus.DONE, RunStatus.FAILED,
    RunStatus.CANCELLED,
]  # fmt: skip
Risk = Literal["low", "medium", "high"]


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


@dataclass(frozen=True)
class StatusView:
    """The one status message of a run, as the reporter wants it shown now.

    `run_id`, `requester` and `title` (the request, cut): who the run is for, for a surface
    that tracks it natively (Slack's agent session) and for the Stop button, shown while the
    run is `live`.
    """

    state: StatusState
    steps: tuple[StatusStep, ...] = ()
    headline: str = ""
    totals: str = ""
    run_id: str = ""
    requester: str = ""
    title: str = ""

    @property
    def live(self) -> bool:
        """Still working (or waiting for a human): the run can be stopped."""
        return self.state in LIVE_RUN_STATES and bool(self.run_id)


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
    state: ApprovalStatus = ApprovalStatus.PENDING
    decided_by: tuple[str, ...] = ()
    decision_reason: str = ""  # the decider's comment (or, with nobody deciding, why it ended)
    expires_at: datetime | None = None
    decided_at: datetime | None = None  # when it ended (a folded card says so)
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


@dataclass(frozen=True, kw_only=True)
class BatchCardView:
    """One card for the calls of one model response that need approval: each call as its own
    card shows it (`items`, in the order asked, each with its own state and buttons), plus
    Approve all / Reject all. `lead_approval_id`: the approval the batch buttons name (any
    member: the broker decides every call of its batch). `approve_all_offered`: someone may
    approve every pending call (the broker still checks the clicker at decision time)."""

    batch_id: str
    items: tuple[ApprovalCardView, ...]
    approve_all_offered: bool = True

    @property
    def lead_approval_id(self) -> str:
        return self.items[0].approval_id if self.items else ""

    @property
    def pending(self) -> tuple[ApprovalCardView, ...]:
        return tuple(item for item in self.items if item.state == ApprovalStatus.PENDING)

    @property
    def ended(self) -> bool:
        """Every call was decided (or expired, or cancelled): the card folds."""
        return not self.pending


AnyCardView = ApprovalCardView | BatchCardView


@dataclass(frozen=True)
class CardPlace:
    """Where a routed copy of an approval card goes: an approvals channel (`target` its id) or
    one approver's direct messages (`target` the user id), in `workspace`."""

    kind: Literal["channel", "dm"]
    workspace: str
    target: str


@dataclass(frozen=True)
class AnswerFile:
    """A document attached to an answer (a tool's HTML or Markdown artifact)."""

    name: str
    content_type: str
    text: str

    @property
    def data(self) -> bytes:
        return self.text.encode("utf-8")


@dataclass(frozen=True)
class BotStatus:
    """What the web console shows about the bot itself."""

    llm_configured: bool
    model: str
    tools: tuple[str, ...] = ()
    surfaces: tuple[str, ...] = ()
    skipped_connectors: tuple[str, ...] = ()
    connectors_down: tuple[dict[str, Any], ...] = ()
