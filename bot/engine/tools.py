"""Tools as data: a name, a description, a JSON Schema and one async `invoke`.

A manifest compiles to `Tool` values, so the engine cannot tell HTTP from MCP from a built-in.
Approval policy is data on the tool, read by the approval gate; the engine never looks at it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

ApprovalMode = Literal["auto", "required", "never"]
RuleApproval = Literal["required", "never", "deny"]  # what a manifest rule may set
Risk = Literal["low", "medium", "high"]
TimeoutOutcome = Literal["expire", "reject"]
DEFAULT_GRANT_TTL_S = 900.0
DEFAULT_ROUTE = "thread"  # thread | channel:<id> | dm: where the approval card goes


@dataclass(frozen=True)
class ToolResult:
    """What a tool returns: the observation text the model reads.

    `content_type` (e.g. `text/html`) and `artifact` (the tool's own say) mark a document for
    the user: the engine keeps it out of the model's context (`bot.engine.artifacts`);
    `filename` names it when the tool knows a name.
    """

    content: str
    is_error: bool = False
    content_type: str = ""
    artifact: bool = False
    filename: str = ""

    @classmethod
    def error(cls, message: str) -> ToolResult:
        return cls(content=message, is_error=True)


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


ToolInvoke = Callable[[dict[str, Any]], Awaitable[ToolResult]]


@dataclass(frozen=True, kw_only=True)
class Audience:
    """Who a call is made for and where its result will be shown: a tool whose answer depends
    on who may see it (the audit report) reads it (`Tool.invoke_for`)."""

    platform: str = ""
    channel: str = ""
    direct: bool = False  # a direct message: only its one user sees the answer
    requesters: tuple[str, ...] = ()


AudienceInvoke = Callable[[Audience, dict[str, Any]], Awaitable[ToolResult]]


@dataclass(frozen=True, kw_only=True)
class Tool:
    """One callable tool, `<connector>__<action>`."""

    name: str
    description: str
    parameters: Mapping[str, Any]
    invoke: ToolInvoke
    connector: str = ""
    action: str = ""
    policy: ApprovalPolicy = field(default_factory=ApprovalPolicy)
    secret_values: Callable[[], Iterable[str]] = field(default=lambda: ())
    # what arguments are checked against before any hook, when it differs from `parameters`
    # (an MCP server's full schema where the model is shown a shortened one)
    validation_schema: Mapping[str, Any] | None = None
    # called instead of `invoke` with who the call is for and where its answer is shown
    invoke_for: AudienceInvoke | None = None

    @property
    def argument_schema(self) -> Mapping[str, Any]:
        return self.parameters if self.validation_schema is None else self.validation_schema

    @property
    def summary(self) -> str:
        """The one line shown in the compact selection catalogue (about 80 characters)."""
        first = self.description.strip().splitlines()[0] if self.description.strip() else ""
        return first[:80]

    def openai_schema(self) -> dict[str, Any]:
        """The `tools=[...]` entry for native function calling."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": dict(self.parameters) or {"type": "object", "properties": {}},
            },
        }


async def _not_callable(args: dict[str, Any]) -> ToolResult:
    return ToolResult.error("no such tool")


def unknown_tool(name: str) -> Tool:
    """What a call to a tool that does not exist is recorded as (it never runs)."""
    shown = name[:200]
    return Tool(
        name=shown, description="", parameters={}, invoke=_not_callable, action=shown,
        policy=ApprovalPolicy(approval="never"),
    )  # fmt: skip


def fingerprint(tool_name: str, args: Mapping[str, Any]) -> str:
    """A stable hash of (tool, arguments): cycle detection and approval binding use it."""
    canonical = json.dumps(
        {"tool": tool_name, "args": args}, sort_keys=True, separators=(",", ":"), default=str
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


class ToolRegistry:
    """An ordered set of tools by name."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            self.register(tool)

    def register(self, tool: Tool) -> None:
        if tool.name in self._tools:
            raise ValueError(f"duplicate tool name {tool.name!r}")
        self._tools[tool.name] = tool

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return list(self._tools)

    def snapshot(self) -> ToolRegistry:
        """A copy: a run keeps the tools it started with while new ones are registered."""
        return ToolRegistry(self._tools.values())

    def subset(self, names: Iterable[str]) -> ToolRegistry:
        """A registry of the named tools that exist here, in this registry's order."""
        wanted = set(names)
        return ToolRegistry(tool for name, tool in self._tools.items() if name in wanted)

    def openai_schemas(self) -> list[dict[str, Any]]:
        return [tool.openai_schema() for tool in self._tools.values()]

    def catalogue(self) -> str:
        """Name and one line per tool, no schemas: the input of the selection call."""
        return "\n".join(f"- {tool.name}: {tool.summary}" for tool in self._tools.values())

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools
