"""Manifest approval fields and `rules` (DESIGN §3 "Approvals"): the models and their compiling.

An action (or the whole connector) lists rules; each `when` is CEL, compiled as the manifest
loads (`bot.approvals.rules.compile_when`), so a syntax error or an unknown variable is a
validation error naming the file, the action, the rule and the column. `compile_rules` turns
them into the `PolicyRule` data the approval gate resolves call by call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator

from bot.approvals.rules import Condition, compile_when
from bot.approvals.schema import (
    DEFAULT_GRANT_TTL_S,
    DEFAULT_ROUTE,
    ApprovalMode,
    ApprovalPolicy,
    EscalationStep,
    PolicyChange,
    PolicyRule,
    Risk,
    RuleApproval,
)

RULE_NAME_PATTERN = r"^[A-Za-z0-9_. -]{1,64}$"
ROUTE_PATTERN = r"^(thread|dm|channel:[A-Za-z0-9_-]{1,80})$"
MAX_TIERS = 10
TimeoutOutcomeField = Literal["expire", "reject"]
MAX_GRANT_TTL_S = 86_400.0


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EscalationTier(Strict):
    """One step of an escalation ladder (`escalate:`): counted from when the approval opened."""

    after_s: float = Field(gt=0, description="seconds after the card with no decision")
    approvers: list[str] = Field(
        min_length=1, description="user ids or group names added to the eligible approvers"
    )
    notify: str = Field("", max_length=500, description="said with the mention")

    def step(self) -> EscalationStep:
        return EscalationStep(self.after_s, tuple(self.approvers), self.notify)


class RoutingFields(Strict):
    """Where the card goes, how it climbs, and how a wait with no decision ends (actions and
    rules alike)."""

    on_timeout: TimeoutOutcomeField | None = Field(
        None, description="what a timeout means: expire (default) or reject; never approve"
    )
    route: str | None = Field(
        None,
        pattern=ROUTE_PATTERN,
        description="thread (default) | channel:<id> (an approvals channel) | dm (each approver)",
    )
    escalate: list[EscalationTier] | None = Field(
        None,
        max_length=MAX_TIERS,
        description="tiers [{after_s, approvers, notify}]: who is added when nobody decides",
    )

    @field_validator("escalate")
    @classmethod
    def _tiers_climb(cls, tiers: list[EscalationTier] | None) -> list[EscalationTier] | None:
        times = [tier.after_s for tier in tiers or ()]
        if any(later <= earlier for earlier, later in zip(times, times[1:], strict=False)):
            raise ValueError("escalation tiers must come in order of increasing after_s")
        return tiers

    def ladder(self) -> tuple[EscalationStep, ...] | None:
        return None if self.escalate is None else tuple(t.step() for t in self.escalate)


class RuleSpec(RoutingFields):
    """`when` holds -> these settings replace the action's; the first matching rule wins."""

    name: str | None = Field(
        None, pattern=RULE_NAME_PATTERN, description="shown in the call log and audit reports"
    )
    when: str = Field(
        "true", min_length=1, max_length=4000, description="a CEL condition over the call"
    )
    approval: RuleApproval | None = Field(
        None, description="required | never | deny (blocked with `reason`, nobody asked)"
    )
    approvers: list[str] | None = None
    min_approvals: int | None = Field(None, ge=1)
    allow_self_approval: bool | None = None
    risk: Risk | None = None
    timeout_s: float | None = Field(None, gt=0, description="how long the approval may wait")
    reason: str | None = Field(None, max_length=500, description="shown on the card (or denial)")
    _condition: Condition | None = PrivateAttr(None)

    @field_validator("when")
    @classmethod
    def _compiles(cls, when: str) -> str:
        compile_when(when)  # a RuleError (a ValueError) names the column
        return when

    def label(self, index: int, scope: str = "") -> str:
        """How the call log and reports name this rule."""
        return f"{scope}{self.name or f'rules[{index}]'}"

    def compiled(self, index: int, scope: str = "") -> PolicyRule:
        if self._condition is None:  # checked when validated; compiled once, when first used
            self._condition = compile_when(self.when)
        condition = self._condition
        change = PolicyChange(
            approval=self.approval,
            approvers=tuple(self.approvers) if self.approvers is not None else None,
            min_approvals=self.min_approvals,
            allow_self_approval=self.allow_self_approval,
            risk=self.risk,
            timeout_s=self.timeout_s,
            on_timeout=self.on_timeout,
            reason=self.reason,
            route=self.route,
            escalate=self.ladder(),
        )
        return PolicyRule(
            label=self.label(index, scope), source=self.when, when=condition, change=change
        )


def compile_rules(
    action_rules: Sequence[RuleSpec], connector_rules: Sequence[RuleSpec] = ()
) -> tuple[PolicyRule, ...]:
    """The connector's rules (`connector.` in their labels), then the action's: a rule for the
    whole connector is a guardrail (a weekend freeze, a denied target) no action rule can skip."""
    return (
        *(rule.compiled(i, "connector.") for i, rule in enumerate(connector_rules)),
        *(rule.compiled(i) for i, rule in enumerate(action_rules)),
    )


class GrantScope(Strict):
    """What an "approve for this thread" grant covers besides the tool: every argument must
    match the approved call, except the ones listed in `vary` (e.g. a free-text `reason`)."""

    vary: list[str] = Field(
        default_factory=list, description="arguments a grant lets vary (top-level names)"
    )


class ApprovalFields(RoutingFields):
    """Who must approve a call (DESIGN §3 "Approvals"); `rules` change it call by call."""

    approval: ApprovalMode = Field(
        "auto",
        description="auto: read-only calls never, mutating calls always; required; never",
    )
    approvers: list[str] = Field(
        default_factory=list,
        description="user ids or group names from config; empty = anyone in the thread",
    )
    min_approvals: int = Field(1, ge=1, description="quorum: distinct approvers needed")
    allow_self_approval: bool = Field(True, description="may the requester approve?")
    risk: Risk = Field("medium", description="shown on the approval card")
    approval_timeout_s: float | None = Field(
        None, gt=0, description="overrides CHATOPS_APPROVAL_TIMEOUT_S for this action"
    )
    grant_ttl_s: float = Field(
        DEFAULT_GRANT_TTL_S,
        gt=0,
        le=MAX_GRANT_TTL_S,
        description="how long an 'approve for this thread' grant lasts (seconds)",
    )
    grant_scope: GrantScope = Field(default_factory=lambda: GrantScope())
    rules: list[RuleSpec] = Field(
        default_factory=list,
        description="CEL rules over the call; the first whose `when` holds sets the policy",
    )

    def policy(
        self,
        *,
        mutating: bool,
        risk: Risk | None = None,
        connector_rules: list[RuleSpec] | None = None,
    ) -> ApprovalPolicy:
        """The static policy, with the connector's rules and then this action's."""
        return ApprovalPolicy(
            approval=self.approval,
            mutating=mutating,
            approvers=tuple(self.approvers),
            min_approvals=self.min_approvals,
            allow_self_approval=self.allow_self_approval,
            risk=risk or self.risk,
            timeout_s=self.approval_timeout_s,
            grant_ttl_s=self.grant_ttl_s,
            grant_vary=tuple(self.grant_scope.vary),
            on_timeout=self.on_timeout or "expire",
            route=self.route or DEFAULT_ROUTE,
            escalate=self.ladder() or (),
            rules=compile_rules(self.rules, connector_rules or ()),
        )


def rule_location(loc: list[Any], data: Any) -> tuple[str, list[Any]]:
    """`rules[1]` in a validation error's location -> "rule 'production' (rules[1])" and the
    rest of the location (the field)."""
    if len(loc) >= 2 and loc[0] == "rules" and isinstance(loc[1], int):
        entries = data.get("rules") if isinstance(data, dict) else None
        entry = entries[loc[1]] if isinstance(entries, list) and loc[1] < len(entries) else {}
        name = entry.get("name") if isinstance(entry, dict) else None
        label = f"rule {name!r} (rules[{loc[1]}])" if name else f"rule rules[{loc[1]}]"
        return label, loc[2:]
    return "", loc
