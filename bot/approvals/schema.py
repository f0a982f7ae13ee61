"""The approval policy's schema: who must approve a call before it runs, and the manifest rules
that pick the policy of each call (DESIGN §3 "Connector manifest").

Approvals own it; the engine's `Tool` carries it as opaque metadata under `APPROVAL_POLICY`
(`policy_metadata` puts it there, `policy_of` reads it back), so the engine knows no approval
schema. Connectors build policies from manifests; the gate resolves them (`bot.approvals.rules`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from bot.engine.tools import Tool, fingerprint

ApprovalMode = Literal["auto", "required", "never"]
RuleApproval = Literal["required", "never", "deny"]  # what a manifest rule may set
Risk = Literal["low", "medium", "high"]
TimeoutOutcome = Literal["expire", "reject"]
DEFAULT_GRANT_TTL_S = 900.0
DEFAULT_ROUTE = "thread"  # thread | channel:<id> | dm: where the approval card goes

APPROVAL_POLICY = "approval_policy"  # the key of a tool's policy in `Tool.metadata`


@dataclass(frozen=True, kw_only=True)
class CallFacts:
    """What a manifest rule may look at: the call's arguments and where and for whom it runs."""

    args: Mapping[str, Any]
    requesters: tuple[str, ...] = ()
    channel: str = ""
    platform: str = ""
    now: datetime | None = None  # aware UTC; None: the time of evaluation
    zone: str = "UTC"  # the configured zone `time.hour` and friends are read in


@dataclass(frozen=True, kw_only=True)
class PolicyChange:
    """What a matching rule sets (None: keep the action's value)."""

    approval: RuleApproval | None = None
    approvers: tuple[str, ...] | None = None
    min_approvals: int | None = None
    allow_self_approval: bool | None = None
    risk: Risk | None = None
    timeout_s: float | None = None
    on_timeout: TimeoutOutcome | None = None
    reason: str | None = None
    route: str | None = None
    escalate: tuple[EscalationStep, ...] | None = None


@dataclass(frozen=True)
class EscalationStep:
    """One tier of an escalation ladder: `after_s` seconds after the approval was opened
    with no decision, `approvers` become eligible too and are mentioned (with `notify`)."""

    after_s: float
    approvers: tuple[str, ...]
    notify: str = ""


@dataclass(frozen=True, kw_only=True)
class PolicyRule:
    """A manifest rule compiled: `when` decides (raising `ValueError` when it cannot be
    evaluated for these facts) and `change` applies; `label` names it in logs and reports."""

    label: str
    source: str
    when: Callable[[CallFacts, ApprovalPolicy], bool]
    change: PolicyChange


@dataclass(frozen=True, kw_only=True)
class ApprovalPolicy:
    """Who must approve a call before it runs (DESIGN §3 "Connector manifest").

    `rules` are checked call by call (first match wins, `bot.approvals.rules.resolve`); the
    fields are the action's static policy, and after resolution the call's own, with `rule`
    naming the rule that decided ('' when none matched)."""

    approval: ApprovalMode | Literal["deny"] = "auto"
    mutating: bool = False
    approvers: tuple[str, ...] = ()
    min_approvals: int = 1
    allow_self_approval: bool = True
    risk: Risk = "medium"
    timeout_s: float | None = None
    grant_ttl_s: float = DEFAULT_GRANT_TTL_S
    grant_vary: tuple[str, ...] = ()  # arguments a grant lets vary; every other one must match
    decided_by: str = ""  # what set it, for people writing rules (`manifests list --connect`)
    on_timeout: TimeoutOutcome = "expire"
    reason: str = ""  # a rule's reason: shown on the card, or why a call is denied
    route: str = DEFAULT_ROUTE  # thread | channel:<id> | dm
    escalate: tuple[EscalationStep, ...] = ()  # tiers, by increasing `after_s`
    rules: tuple[PolicyRule, ...] = ()
    rule: str = ""  # the rule that decided this call's policy ('' = the static policy)

    @property
    def denied(self) -> bool:
        return self.approval == "deny"

    @property
    def requires_approval(self) -> bool:
        """`auto` means: read-only calls never, mutating calls always. A denied call is never
        free: a path that forgot to check `denied` asks a human rather than running it."""
        if self.approval in ("required", "deny"):
            return True
        if self.approval == "never":
            return False
        return self.mutating

    @property
    def grants_allowed(self) -> bool:
        """ "Approve for this thread" only where one person's approval is enough: a grant lets
        later calls through unasked, which would skip a quorum or the four-eyes rule."""
        return self.min_approvals <= 1 and self.allow_self_approval

    def grant_fingerprint(self, tool_name: str, args: Mapping[str, Any]) -> str:
        """What a grant covers: the tool and its arguments minus the `grant_vary` ones."""
        return fingerprint(tool_name, {k: v for k, v in args.items() if k not in self.grant_vary})


NO_POLICY = ApprovalPolicy()


def policy_metadata(policy: ApprovalPolicy) -> dict[str, object]:
    """A tool's `metadata` carrying `policy`."""
    return {APPROVAL_POLICY: policy}


def policy_of(tool: Tool) -> ApprovalPolicy:
    """The approval policy a tool carries; a tool without one gets the default (`auto`: asks
    before a mutating call; a tool with no policy is read-only). Anything but a policy under
    the key is a programming error, and raises rather than letting a call through unasked."""
    found = tool.metadata.get(APPROVAL_POLICY)
    if found is None:
        return NO_POLICY
    if not isinstance(found, ApprovalPolicy):
        raise TypeError(f"tool {tool.name!r} carries {type(found).__name__}, not an ApprovalPolicy")
    return found
