"""Manifest `rules`: CEL conditions over a call that pick its approval policy (first match wins).

A rule's `when` is compiled once, when the manifest loads (`compile_when`): a syntax error or a
name that is not one of the variables below is an error naming the line and column, so a typo
never waits for the first call to show. At call time `resolve` evaluates the rules in order and
applies the first match to the action's static policy. A condition that cannot be evaluated for
this call (a missing argument, a type mismatch) does not count as "no match": the call is
denied with the reason, because skipping a rule could skip the one that asks for more people.

Variables: `args` (the call's arguments), `requesters` (user ids), `channel`, `platform`,
`time` (`utc`: a timestamp; `hour`, `minute`, `weekday` "Mon".."Sun", `date` "YYYY-MM-DD" and
`zone` in the configured zone, `CHATOPS_TIMEZONE`) and `policy` (the action's static policy:
`approval`, `mutating`, `approvers`, `min_approvals`, `allow_self_approval`, `risk`).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

import celpy
from celpy import celtypes
from lark import Token, Tree

from bot.approvals.schema import ApprovalPolicy, CallFacts, PolicyChange, PolicyRule, policy_of
from bot.clock import utcnow
from bot.engine.hooks import PreToolUseContext
from bot.errors import ApprovalError

VARIABLES = ("args", "requesters", "channel", "platform", "time", "policy")
# names CEL itself gives meaning to (type names usable as values: `type(x) == int`)
_CEL_NAMES = frozenset(
    {"int", "uint", "double", "bool", "string", "bytes", "list", "map", "null_type", "type"}
)
# macros whose first argument names a variable bound inside them: `args.hosts.all(h, ...)`
_BINDING_MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})
_WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")

log = logging.getLogger(__name__)


class RuleError(ApprovalError, ValueError):
    """A rule's `when` cannot be compiled (at load) or evaluated (at a call); says where."""

    def __init__(self, message: str, *, line: int = 0, column: int = 0) -> None:
        super().__init__(message)
        self.line = line
        self.column = column


Condition = Callable[[CallFacts, ApprovalPolicy], bool]


def compile_when(expression: str) -> Condition:
    """Compile one `when`: raises `RuleError` naming the column of a syntax error or of a
    variable that does not exist."""
    env = celpy.Environment()
    try:
        ast = env.compile(expression)
    except celpy.CELParseError as exc:
        line, column = exc.line or 1, exc.column or 1
        text = expression.splitlines()[line - 1] if expression.strip() else ""
        near = text[column - 1 : column + 19].strip()
        where = f"line {line}, column {column}" if "\n" in expression else f"column {column}"
        said = f" near {near!r}" if near else " (the expression ends too soon)"
        raise RuleError(f"syntax error at {where}{said}", line=line, column=column) from None
    _check_names(ast, multiline="\n" in expression)
    program = env.program(ast)

    def when(facts: CallFacts, policy: ApprovalPolicy) -> bool:
        try:
            value = program.evaluate(activation(facts, policy))
        except celpy.CELEvalError as exc:
            raise RuleError(_eval_problem(exc)) from None
        except Exception as exc:  # noqa: BLE001 - a user's expression: any failure fails closed
            raise RuleError(f"{type(exc).__name__}: {exc}") from None
        if not isinstance(value, celtypes.BoolType | bool):
            raise RuleError(f"the condition gave {type(value).__name__}, not true or false")
        return bool(value)

    return when


def _check_names(ast: Tree, *, multiline: bool) -> None:
    """Every free name must be a variable: CEL would only notice at evaluation."""
    bound = set()
    for node in ast.iter_subtrees():
        if node.data != "member_dot_arg" or len(node.children) < 3:
            continue
        method, arguments = node.children[1], node.children[2]
        if str(method) in _BINDING_MACROS and isinstance(arguments, Tree) and arguments.children:
            first = arguments.children[0]
            names = [t for t in first.scan_values(lambda v: isinstance(v, Token))]
            bound.update(str(t) for t in names[:1])
    for node in ast.iter_subtrees_topdown():
        if node.data != "ident":
            continue
        token = node.children[0]
        name = str(token)
        if name in VARIABLES or name in bound or name in _CEL_NAMES:
            continue
        line, column = getattr(token, "line", 1) or 1, getattr(token, "column", 1) or 1
        where = f"line {line}, column {column}" if multiline else f"column {column}"
        raise RuleError(
            f"unknown variable {name!r} at {where} (variables: {', '.join(VARIABLES)})",
            line=line,
            column=column,
        )


def _eval_problem(exc: celpy.CELEvalError) -> str:
    text = str(exc.args[0]) if exc.args else str(exc)
    if "no such member" in text or "no such key" in text:
        return f"{text} (test an optional argument with has(args.name) first)"
    return text


def activation(facts: CallFacts, policy: ApprovalPolicy) -> dict[str, Any]:
    """The CEL variables for one call."""
    now = facts.now or utcnow()
    local = now.astimezone(ZoneInfo(facts.zone))
    time: dict[str, Any] = {
        "zone": facts.zone,
        "hour": local.hour,
        "minute": local.minute,
        "weekday": _WEEKDAYS[local.weekday()],
        "date": local.date().isoformat(),
    }
    cel_time = celpy.json_to_cel(time)
    cel_time[celtypes.StringType("utc")] = celtypes.TimestampType(now)
    static = {
        "approval": policy.approval,
        "mutating": policy.mutating,
        "approvers": list(policy.approvers),
        "min_approvals": policy.min_approvals,
        "allow_self_approval": policy.allow_self_approval,
        "risk": policy.risk,
    }
    return {
        "args": celpy.json_to_cel(_plain(dict(facts.args))),
        "requesters": celpy.json_to_cel(list(facts.requesters)),
        "channel": celtypes.StringType(facts.channel),
        "platform": celtypes.StringType(facts.platform),
        "time": cel_time,
        "policy": celpy.json_to_cel(static),
    }


def _plain(value: Any) -> Any:
    """JSON-shaped data only (a model's arguments already are; anything else becomes text)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


@dataclasses.dataclass(frozen=True)
class Resolution:
    """The policy of one call: the static one changed by the first matching rule; `error` is
    set when a rule could not be evaluated (the call is then denied)."""

    policy: ApprovalPolicy
    error: str = ""


def resolve(policy: ApprovalPolicy, facts: CallFacts) -> Resolution:
    """Apply the first rule whose `when` holds; no rule: the static policy as it is."""
    for rule in policy.rules:
        try:
            matched = rule.when(facts, policy)
        except RuleError as exc:
            why = f"the approval rule {rule.label!r} could not be evaluated: {exc}"
            log.warning("%s", why)
            denied = dataclasses.replace(policy, approval="deny", reason=why, rule=rule.label)
            return Resolution(denied, error=why)
        if matched:
            return Resolution(apply(policy, rule))
    return Resolution(policy)


def apply(policy: ApprovalPolicy, rule: PolicyRule) -> ApprovalPolicy:
    """The policy with what `rule` sets, naming the rule."""
    changes = {
        field.name: getattr(rule.change, field.name)
        for field in dataclasses.fields(PolicyChange)
        if getattr(rule.change, field.name) is not None
    }
    return dataclasses.replace(policy, **changes, rule=rule.label)


def resolve_for(
    ctx: PreToolUseContext[Any], zone: str, *, now: datetime | None = None
) -> Resolution:
    """The policy of the call a PreToolUse hook is looking at (the gate, the terminal's);
    `now`: the time rules read (the broker's clock; default the wall clock)."""
    facts = CallFacts(
        args=ctx.args,
        requesters=ctx.requesters,
        channel=ctx.run.channel,
        platform=ctx.run.platform,
        now=now or utcnow(),
        zone=zone,
    )
    return resolve(policy_of(ctx.tool), facts)


def rejection(tool_name: str, *, by: str, reason: str = "") -> str:
    """What the model reads when a human rejected the call (in a chat or at the terminal): the
    one rejection message, so the model is told the same thing wherever it was refused."""
    why = reason.strip() or "no reason given"
    return (
        f"The call `{tool_name}` was REJECTED by {by}. Reason: {why}. It was NOT run. "
        "Do not retry the same call; tell the user, or take a different approach that "
        "respects the reason."
    )


def changes_requested(tool_name: str, *, by: str, guidance: str) -> str:
    """What the model reads when an approver asked for changes instead of the call: guidance,
    not a refusal (a rejection says "do not retry")."""
    return (
        f"The call `{tool_name}` was NOT run: {by} asked for changes instead. Their guidance: "
        f"{guidance.strip() or '(none given)'}\nFollow it: you may propose a different call "
        "that does what they ask (it will be sent for approval again), or tell the user."
    )


def denial(tool_name: str, policy: ApprovalPolicy) -> str:
    """What the model reads when a manifest rule denies the call outright."""
    why = policy.reason or "the connector's policy does not allow this call"
    return (
        f"The call `{tool_name}` is DENIED by the approval rule {policy.rule!r}: {why}. It did "
        "not run and nobody was asked. Do not retry it; tell the user why."
    )
