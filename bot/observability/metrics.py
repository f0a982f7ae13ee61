"""The bot's Prometheus metrics: one registry and its instruments per runtime, never the
library's global registry (two apps in one process, as in the tests, never share a count).

`Metrics` holds every instrument and the methods the features call where things happen (a run
ends, a tool call is logged, an approval is decided, the model answers, a platform API is
called, a statement goes to the database). Label values are bounded: connector, action, rule
and API method names come from manifests and the code, statement kinds from a statement's
first keyword (never its text), and `BoundedLabels` still turns anything past
`LABEL_VALUES_MAX` distinct values per label, or any value that does not look like a name, into
`other`; user ids, thread ids, arguments and free text are never labels.
The per-workspace series (`chatops_workspace_*`: runs started and ended, approvals decided)
name the workspace through `WorkspaceLabels` (the first N seen, then `other`).
`docs/operations.md` lists every metric.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import choose_encoder

from bot.observability.workspace_labels import WorkspaceLabels

OTHER = "other"
LABEL_VALUES_MAX = 200  # distinct values of one label before the rest become `other`
_NAME = re.compile(r"[A-Za-z0-9_.:/ -]{1,80}")
RUN_OUTCOMES = ("done", "failed", "cancelled")
TOKEN_KINDS = ("prompt", "completion")
MODEL_CALLS = ("chat", "stream")
LAG_STATS = ("p50", "p99", "max")
STATEMENT_KINDS = ("select", "insert", "update", "delete")  # anything else counts as `other`
_FIRST_WORD = re.compile(r"\s*([A-Za-z]+)")

MODEL_BUCKETS_S = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0)
TOOL_BUCKETS_S = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
DECISION_BUCKETS_S = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 14400.0,
                      86400.0)  # fmt: skip
LAG_BUCKETS_S = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class BoundedLabels:
    """Keeps each label's value set bounded: a value is kept as it is while fewer than
    `limit` distinct values of that label were seen and it looks like a name; else `other`."""

    def __init__(self, limit: int = LABEL_VALUES_MAX) -> None:
        self.limit = limit
        self._seen: dict[str, set[str]] = {}

    def __call__(self, label: str, value: str) -> str:
        seen = self._seen.setdefault(label, set())
        if value in seen:
            return value
        if len(seen) >= self.limit or not _NAME.fullmatch(value):
            return OTHER
        seen.add(value)
        return value


@dataclass(frozen=True, eq=False)
class PlatformMeter:
    """One chat platform's API calls, as its client sees them (`platform`: slack, feishu)."""

    metrics: Metrics
    platform: str

    def call(self, method: str) -> None:
        """One API call (retries of it not counted again)."""
        self.metrics.platform_calls.labels(self.platform, self._method(method)).inc()

    def error(self, method: str, kind: str) -> None:
        """A call that failed in the end; `kind`: rate_limited, server, api, connection."""
        labels = (self.platform, self._method(method), self.metrics.bound("kind", kind))
        self.metrics.platform_errors.labels(*labels).inc()

    def rate_limited(self, method: str) -> None:
        """The platform answered 429 (or its throttling code) once, retried or not."""
        self.metrics.platform_rate_limited.labels(self.platform, self._method(method)).inc()

    def _method(self, method: str) -> str:
        return self.metrics.bound(f"{self.platform}_method", method)


@dataclass(eq=False)
class Metrics:
    """Every instrument of one runtime, on its own `CollectorRegistry` (`render()` scrapes)."""

    registry: CollectorRegistry = field(default_factory=CollectorRegistry)
    bound: BoundedLabels = field(default_factory=BoundedLabels)
    workspaces: WorkspaceLabels = field(default_factory=WorkspaceLabels)
    runs: Counter = field(init=False, repr=False)
    active_runs: Gauge = field(init=False, repr=False)
    leases_held: Gauge = field(init=False, repr=False)
    tool_calls: Counter = field(init=False, repr=False)
    tool_seconds: Histogram = field(init=False, repr=False)
    approvals_pending: Gauge = field(init=False, repr=False)
    decision_seconds: Histogram = field(init=False, repr=False)
    model_seconds: Histogram = field(init=False, repr=False)
    model_tokens: Counter = field(init=False, repr=False)
    model_errors: Counter = field(init=False, repr=False)
    platform_calls: Counter = field(init=False, repr=False)
    platform_errors: Counter = field(init=False, repr=False)
    platform_rate_limited: Counter = field(init=False, repr=False)
    loop_lag: Histogram = field(init=False, repr=False)
    loop_lag_recent: Gauge = field(init=False, repr=False)
    database_up: Gauge = field(init=False, repr=False)
    db_statements: Counter = field(init=False, repr=False)
    runs_queued: Gauge = field(init=False, repr=False)
    workspace_runs_started: Counter = field(init=False, repr=False)
    workspace_runs: Counter = field(init=False, repr=False)
    workspace_decisions: Counter = field(init=False, repr=False)

    def __post_init__(self) -> None:
        r = self.registry
        self.runs = Counter("chatops_runs", "Runs ended, by outcome.", ["outcome"], registry=r)
        self.active_runs = Gauge(
            "chatops_active_runs", "Runs this process is working on now.", registry=r
        )
        self.runs_queued = Gauge(
            "chatops_runs_queued",
            "Runs waiting for a seat (CHATOPS_MAX_WORKING_RUNS), their status saying so.",
            registry=r,
        )
        self.leases_held = Gauge(
            "chatops_leases_held", "Unfinished runs whose lease this process holds.", registry=r
        )
        self.tool_calls = Counter(
            "chatops_tool_calls",
            "Tool call attempts, by connector, action and outcome (ok, error, blocked, "
            "rejected, expired, lost).",
            ["connector", "action", "outcome"],
            registry=r,
        )
        self.tool_seconds = Histogram(
            "chatops_tool_call_duration_seconds",
            "How long tool calls took (calls that went out), by connector and action.",
            ["connector", "action"],
            buckets=TOOL_BUCKETS_S,
            registry=r,
        )
        self.audit_events_pending = Gauge(
            "chatops_audit_events_pending",
            "Audit events waiting in the outbox for a sink (read from the database at scrape "
            "time): steadily growing means the sink is down or slower than the bot.",
            ["sink"],
            registry=r,
        )
        self.approvals_pending = Gauge(
            "chatops_approvals_pending",
            "Approvals waiting for a decision (read from the database at scrape time).",
            ["connector", "action", "rule"],
            registry=r,
        )
        self.decision_seconds = Histogram(
            "chatops_approval_decision_seconds",
            "From an approval's card to its decision, by connector, action, rule and decision.",
            ["connector", "action", "rule", "decision"],
            buckets=DECISION_BUCKETS_S,
            registry=r,
        )
        self.model_seconds = Histogram(
            "chatops_model_request_duration_seconds",
            "Model requests (each attempt; a stream until it opened), by call.",
            ["call"],
            buckets=MODEL_BUCKETS_S,
            registry=r,
        )
        self.model_tokens = Counter(
            "chatops_model_tokens", "Tokens the model reported, by kind.", ["kind"], registry=r
        )
        self.model_errors = Counter(
            "chatops_model_errors", "Failed model requests, by kind.", ["kind"], registry=r
        )
        self.platform_calls = Counter(
            "chatops_platform_api_calls",
            "Chat platform API calls, by platform and method.",
            ["platform", "method"],
            registry=r,
        )
        self.platform_errors = Counter(
            "chatops_platform_api_errors",
            "Chat platform API calls that failed, by platform, method and kind.",
            ["platform", "method", "kind"],
            registry=r,
        )
        self.platform_rate_limited = Counter(
            "chatops_platform_api_rate_limited",
            "Rate-limited answers (HTTP 429 or the platform's throttling code), by method.",
            ["platform", "method"],
            registry=r,
        )
        self.loop_lag = Histogram(
            "chatops_event_loop_lag_seconds",
            "How late the event loop woke a task that slept (one sample every 50 ms).",
            buckets=LAG_BUCKETS_S,
            registry=r,
        )
        self.loop_lag_recent = Gauge(
            "chatops_event_loop_lag_recent_seconds",
            "Event loop lag over the last 10 s, by stat (p50, p99, max).",
            ["stat"],
            registry=r,
        )
        self.database_up = Gauge(
            "chatops_database_up",
            "1 when the last scrape could read the database (the gauges read from it are "
            "current), else 0.",
            registry=r,
        )
        self.db_statements = Counter(
            "chatops_db_statements",
            "Statements sent to the database through the runtime's engine, by kind (select, "
            "insert, update, delete, other).",
            ["kind"],
            registry=r,
        )
        self.workspace_runs_started = Counter(
            "chatops_workspace_runs_started",
            "Runs begun by this process (a resumed one not again), by platform and workspace.",
            ["platform", "workspace"],
            registry=r,
        )
        self.workspace_runs = Counter(
            "chatops_workspace_runs",
            "Runs ended, by platform, workspace and outcome.",
            ["platform", "workspace", "outcome"],
            registry=r,
        )
        self.workspace_decisions = Counter(
            "chatops_workspace_approvals_decided",
            "Approvals decided (approved, rejected, expired, cancelled), by the platform and "
            "workspace of their card.",
            ["platform", "workspace", "decision"],
            registry=r,
        )
        # resolved once: a statement is counted on the database thread, on every round trip
        self._statements = {k: self.db_statements.labels(k) for k in (*STATEMENT_KINDS, OTHER)}
        self._pending_seen: set[tuple[str, str, str]] = set()
        for outcome in RUN_OUTCOMES:  # every outcome shows from the start, at 0
            self.runs.labels(outcome)
        for kind in TOKEN_KINDS:
            self.model_tokens.labels(kind)

    # --- runs and leases ---------------------------------------------------------------------

    def run_started(self, platform: str, workspace: str) -> None:
        """A run begins here (its thread's platform and workspace)."""
        names = self._where(platform, workspace)
        self.workspace_runs_started.labels(*names).inc()

    def run_ended(self, outcome: str, where: tuple[str, str] | None = None) -> None:
        """A run ended (counted by whoever won its ending, once per run); `where`: its
        thread's (platform, workspace) when the ender knows it."""
        outcome = str(outcome)  # a RunStatus
        outcome = outcome if outcome in RUN_OUTCOMES else OTHER
        self.runs.labels(outcome).inc()
        if where is not None:
            self.workspace_runs.labels(*self._where(*where), outcome).inc()

    def _where(self, platform: str, workspace: str | None) -> tuple[str, str]:
        return self.bound("platform", platform or "none"), self.workspaces(platform, workspace)

    def set_gauges(self, *, active_runs: int, leases_held: int, runs_queued: int = 0) -> None:
        self.active_runs.set(active_runs)
        self.leases_held.set(leases_held)
        self.runs_queued.set(runs_queued)

    def set_audit_pending(self, sinks: tuple[str, ...], pending: dict[str, int]) -> None:
        """Each configured sink's waiting events (0 when none wait)."""
        for sink in sinks:
            self.audit_events_pending.labels(sink).set(pending.get(sink, 0))

    # --- tools and approvals -----------------------------------------------------------------

    def tool_call(
        self, connector: str, action: str, outcome: str, seconds: float | None = None
    ) -> None:
        """One logged attempt; `seconds` when the call went out."""
        names = (self.bound("connector", connector or "none"), self.bound("action", action))
        self.tool_calls.labels(*names, self.bound("tool_outcome", outcome)).inc()
        if seconds is not None:
            self.tool_seconds.labels(*names).observe(max(0.0, seconds))

    def approval_decided(
        self, connector: str, action: str, rule: str, decision: str, seconds: float,
        where: tuple[str, str] | None = None,
    ) -> None:  # fmt: skip
        """An approval left `pending` (`decision`: approved, rejected, expired, cancelled);
        `where`: its card's (platform, workspace)."""
        labels = self._approval_labels(connector, action, rule)
        decision = self.bound("decision", decision)
        self.decision_seconds.labels(*labels, decision).observe(max(0.0, seconds))
        if where is not None:
            self.workspace_decisions.labels(*self._where(*where), decision).inc()

    def set_pending_approvals(self, counts: Mapping[tuple[str, str, str], int]) -> None:
        """The pending approvals by (connector, action, rule) as the database has them now;
        a label set seen before and absent now reads 0 (not a stale count)."""
        current: dict[tuple[str, str, str], int] = {}
        for (connector, action, rule), count in counts.items():
            labels = self._approval_labels(connector, action, rule)
            current[labels] = current.get(labels, 0) + count
        for labels in self._pending_seen - current.keys():
            self.approvals_pending.labels(*labels).set(0)
        for labels, count in current.items():
            self.approvals_pending.labels(*labels).set(count)
        self._pending_seen |= current.keys()

    def _approval_labels(self, connector: str, action: str, rule: str) -> tuple[str, str, str]:
        return (
            self.bound("connector", connector or "none"),
            self.bound("action", action or "none"),
            self.bound("rule", rule or "static"),
        )

    # --- the model (bot.engine.llm.ModelMeter) -----------------------------------------------

    def model_attempt(self, call: str, seconds: float | None, error: str | None) -> None:
        """One request to the model (`seconds` None: none went out); `error`: its kind when
        it failed."""
        if seconds is not None and call in MODEL_CALLS:
            self.model_seconds.labels(call).observe(max(0.0, seconds))
        if error is not None:
            self.model_errors.labels(self.bound("model_error", error)).inc()

    def model_usage(self, prompt_tokens: int, completion_tokens: int) -> None:
        self.model_tokens.labels("prompt").inc(max(0, prompt_tokens))
        self.model_tokens.labels("completion").inc(max(0, completion_tokens))

    # --- platforms and the event loop --------------------------------------------------------

    def platform(self, name: str) -> PlatformMeter:
        """What a surface's API client counts its calls with."""
        return PlatformMeter(self, name)

    def loop_lag_sample(self, lag_s: float) -> None:
        self.loop_lag.observe(max(0.0, lag_s))

    def set_loop_lag(self, summary_ms: Mapping[str, float | int]) -> None:
        """The recent window's p50/p99/max (`bot.loop_lag.LoopLag.summary`, milliseconds)."""
        for stat in LAG_STATS:
            self.loop_lag_recent.labels(stat).set(float(summary_ms.get(stat, 0.0)) / 1000)

    # --- the database ------------------------------------------------------------------------

    def db_statement(self, statement: str) -> None:
        """One statement sent (`bot.observability.db_statements`): counted by its first
        keyword, never its text."""
        self._statements[statement_kind(statement)].inc()

    # --- the scrape --------------------------------------------------------------------------

    def render(self, accept: str | None = None) -> tuple[bytes, str]:
        """The exposition body and its content type (OpenMetrics when the scraper asks)."""
        encoder, content_type = choose_encoder(accept or "")
        return encoder(self.registry), content_type


def statement_kind(statement: str) -> str:
    """`select`, `insert`, `update` or `delete` from a statement's first keyword; anything
    else (`WITH`, `PRAGMA`, DDL, a leading comment) is `other`."""
    match = _FIRST_WORD.match(statement)
    kind = match.group(1).lower() if match else OTHER
    return kind if kind in STATEMENT_KINDS else OTHER
