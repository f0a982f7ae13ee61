"""The audit report as the surfaces show it: the query (window and filters), every figure the
report holds, and what a chat audit command answers.

A view model of the chat vocabulary, like the approval card: `bot.audit.report` (the SQL) fills
it, the surfaces render it and the ports speak it, so neither needs the other. Times are aware
UTC; the window is `since <= at < until`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from bot.clock import as_utc, utcnow

DEFAULT_WINDOW = "7d"
DEFAULT_MAX_CALLS = 200
_DURATION = re.compile(r"^(\d+)\s*([mhdw])$", re.IGNORECASE)
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
# a call's outcome as reports count it; `unknown`: started, never completed (the bot stopped)
Outcome = Literal["ok", "error", "blocked", "rejected", "expired", "unknown"]
OUTCOMES: tuple[str, ...] = ("ok", "error", "blocked", "rejected", "expired", "unknown")


def parse_duration(text: str) -> timedelta | None:
    """`30m`, `12h`, `7d`, `4w` -> a timedelta; anything else -> None."""
    match = _DURATION.match(text.strip())
    if match is None:
        return None
    try:
        return timedelta(**{_UNITS[match.group(2).lower()]: int(match.group(1))})
    except OverflowError:  # more days than a timedelta holds: not a usable duration
        return None


def parse_when(text: str, *, now: datetime) -> datetime:
    """A window bound: a duration ago (`7d`) or an ISO time (naive means UTC).

    Raises ValueError with a message a user can act on.
    """
    ago = parse_duration(text)
    if ago is not None:
        try:
            return now - ago
        except OverflowError:
            raise ValueError(f"bad time {text!r}: that is before the year 1") from None
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(
            f"bad time {text!r}: use a duration ago (30m, 12h, 7d, 4w) "
            "or an ISO time (2026-11-01 or 2026-11-01T09:00Z)"
        ) from None
    return as_utc(value)


class AuditQuery(BaseModel):
    """What to report on: calls with `since <= at < until`, optionally narrowed."""

    model_config = ConfigDict(frozen=True)

    since: datetime
    until: datetime
    connector: str | None = None
    action: str | None = None
    user: str | None = Field(default=None, description="requester or approver")
    platform: str | None = Field(default=None, description="only calls made on this platform")
    channel: str | None = Field(default=None, description="only calls made in this channel")
    workspace: str | None = Field(
        default=None, description="only calls made in this workspace (Slack team, Feishu tenant)"
    )
    outcome: Outcome | None = Field(default=None, description="only calls that ended so")
    hide_direct: bool = Field(
        default=False, description="direct messages' calls: counted, arguments and errors hidden"
    )
    max_calls: int | None = Field(default=DEFAULT_MAX_CALLS, description="None lists every one")
    top_errors: int = 10

    @field_validator("since", "until")
    @classmethod
    def _utc(cls, value: datetime) -> datetime:
        return as_utc(value)

    @model_validator(mode="after")
    def _ordered(self) -> AuditQuery:
        if self.until <= self.since:
            raise ValueError("the window ends before it starts (until must be after since)")
        return self

    @classmethod
    def window(
        cls,
        since: str = DEFAULT_WINDOW,
        until: str | None = None,
        *,
        now: datetime | None = None,
        **filters: Any,
    ) -> AuditQuery:
        """A query from user text (`7d`, ISO times); ValueError with a readable message."""
        now = now or utcnow()
        start = parse_when(since, now=now)
        end = parse_when(until, now=now) if until else now
        if end <= start:
            raise ValueError(
                f"the window ends before it starts: since {start:%Y-%m-%d %H:%M} UTC, "
                f"until {end:%Y-%m-%d %H:%M} UTC"
            )
        return cls(since=start, until=end, **filters)

    def describe(self) -> str:
        """One line naming the window and filters, for report titles."""
        text = f"{self.since:%Y-%m-%d %H:%M} to {self.until:%Y-%m-%d %H:%M} UTC"
        for name in ("connector", "action", "user", "outcome"):
            value = getattr(self, name)
            if value:
                text += f", {name} {value}"
        if self.workspace:
            text += f", workspace {self.platform or 'any'}:{self.workspace} only"
        if self.channel:
            text += f", this channel only ({self.platform}:{self.channel})"
        if self.hide_direct:
            text += ", direct messages' arguments hidden"
        return text


class OutcomeCounts(BaseModel):
    """Calls by outcome: the columns totals, actions and requesters share."""

    calls: int = 0
    ok: int = 0
    errors: int = 0
    blocked: int = 0
    rejected: int = 0
    expired: int = 0
    unknown: int = Field(default=0, description="started, never completed: the bot stopped")


class Totals(OutcomeCounts):
    mutating: int = 0
    requesters: int = 0


class ActionStats(OutcomeCounts):
    """Per connector and action; durations over executed calls (ok or error), nearest rank."""

    connector: str
    action: str
    p50_ms: float | None = None
    p95_ms: float | None = None


class RequesterStats(OutcomeCounts):
    requester: str
    mutating: int = 0


class ApprovalStats(BaseModel):
    """Approvals requested in the window, by outcome; decision time over decided ones."""

    requested: int = 0
    approved: int = 0
    rejected: int = 0
    expired: int = 0
    cancelled: int = 0
    pending: int = 0
    median_decision_s: float | None = None
    self_approvals: int = 0


class FeedbackStats(BaseModel):
    """Thumbs on the answers of runs started in the window (each person's latest rating)."""

    answers_rated: int = 0
    up: int = 0
    down: int = 0


class RunErrorStats(BaseModel):
    """One reason runs failed (`run.error`, redacted), how often and when last."""

    error: str
    count: int
    last_at: datetime


class RunStats(BaseModel):
    """Runs started in the window, by how they stand now; the most frequent reasons the failed
    ones give (a model that refused its key makes no call, so only here does it show)."""

    started: int = 0
    done: int = 0
    failed: int = 0
    cancelled: int = 0
    waiting_approval: int = 0
    running: int = Field(default=0, description="running, or writing its answer")
    errors: list[RunErrorStats] = []


class ApproverStats(BaseModel):
    approver: str
    approved: int = 0
    rejected: int = 0
    self_approvals: int = 0


class RuleStats(BaseModel):
    """Approvals by rule: per action and the manifest rule that decided each call's policy
    (`(static policy)` where no rule matched), how the calls' approvals went."""

    connector: str
    action: str
    rule: str
    calls: int = 0
    not_required: int = Field(default=0, description="ran without asking")
    approved: int = Field(default=0, description="approved, or under a thread grant")
    rejected: int = 0
    expired: int = 0
    denied: int = Field(default=0, description="blocked by the rule, nobody asked")


class CallEntry(BaseModel):
    """One mutating call: who asked, who decided, when, what, and how it ended."""

    id: int
    at: datetime
    platform: str
    channel: str
    requester: str
    workspace: str = ""  # the Slack team or Feishu tenant it was made in ('' when not known)
    connector: str
    action: str
    arguments: dict[str, Any]
    approval_status: str
    policy_rule: str = ""
    approved_by: list[str] = []
    rejected_by: list[str] = []
    approval_comment: str = ""  # what the decider wrote with their approval or rejection
    result_status: str
    duration_ms: float
    error: str | None = None
    # the thumbs on the answer of the run the call was made in
    feedback_up: int = 0
    feedback_down: int = 0
    run_id: str = ""  # the run the call was made in (the console links its conversation)


class ErrorStats(BaseModel):
    connector: str
    action: str
    error: str
    count: int
    last_at: datetime


class AuditReport(BaseModel):
    query: AuditQuery
    generated_at: datetime
    totals: Totals
    actions: list[ActionStats]
    requesters: list[RequesterStats]
    approvals: ApprovalStats
    approvers: list[ApproverStats]
    rules: list[RuleStats] = []
    mutating_calls: list[CallEntry]
    mutating_calls_total: int
    errors: list[ErrorStats]
    feedback: FeedbackStats = FeedbackStats()
    runs: RunStats = RunStats()

    @property
    def mutating_calls_omitted(self) -> int:
        return self.mutating_calls_total - len(self.mutating_calls)


# --- what a chat audit command answers (the surfaces' audit-command port speaks these) --------

USAGE = (
    "Usage: `audit [WINDOW] [CONNECTOR] [ACTION] [share]`, e.g. `audit 7d` or "
    "`audit 24h pagerduty share` (WINDOW: 30m, 12h, 7d, 4w; default 7d). The report is for "
    "you alone; with `share` it is posted for everyone here, covering this channel only."
)


@dataclass(frozen=True)
class Place:
    """Where a report would be shown: a channel (or chat), or someone's direct messages."""

    platform: str
    channel: str
    direct: bool = False
    # the team or tenant it was asked in: whose `audit_viewers` apply; where one deployment
    # serves several workspaces of the platform, the only one a report covers
    workspace: str = ""


@dataclass(frozen=True)
class AuditChatReply:
    """What the surface does: show `report` to the viewer privately (an ephemeral message on
    Slack, a direct message on Feishu), or post it where it was asked when `shared`; or tell
    the sender `message` privately (not allowed, or a usage error)."""

    kind: Literal["report", "not_allowed", "usage"]
    report: AuditReport | None = None
    message: str = ""
    shared: bool = False
