"""One tool call attempt: PreToolUse hooks, the tool itself, PostToolUse hooks, events, record.

Model-made failures (unknown tool, arguments that are not a JSON object or that the tool's schema
refuses, a tool that raises) come back as error observations so the agent can correct itself;
only cancellation propagates. Arguments are checked against the schema before any PreToolUse
hook, so only a valid call can reach an approval card.
PostToolUse hooks see every attempt, blocked, replayed and malformed ones included (outcome
`invalid`: they never reach a PreToolUse hook or the tool), so the call log is whole.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bot.engine import prompts
from bot.engine.arguments import argument_problem
from bot.engine.artifacts import as_artifact, document_type
from bot.engine.artifacts import observation as artifact_observation
from bot.engine.events import IterationDone, IterationStart, ToolProgress
from bot.engine.hooks import Outcome, PostToolUseContext, PreToolDecision, PreToolUseContext
from bot.engine.notes import ApprovalNote
from bot.engine.scope import RunScope
from bot.engine.state import StepRecord
from bot.engine.tool_requests import REQUEST_TOOLS, grant_tools
from bot.engine.tools import (
    AskUser,
    Audience,
    Question,
    Reply,
    Tool,
    ToolImage,
    ToolResult,
    fingerprint,
    unknown_tool,
)

log = logging.getLogger(__name__)

ARGUMENT_CHECK = "argument_check"  # `blocked_by` of a call whose arguments the schema refuses
RAN: frozenset[Outcome] = frozenset({"executed", "error", "replayed"})  # the tool was invoked
STOPPED = "Not run: the run was stopped."


@dataclass(frozen=True)
class CallOutcome:
    """What the loop needs back: the observation text, the cycle-detection fingerprint, and
    whether the tool ran (blocked, unknown and malformed attempts did not)."""

    call_id: str
    name: str
    observation: str
    fingerprint: str
    ran: bool = False
    images: tuple[ToolImage, ...] = ()  # shown to a model that accepts images (`vision`)


VISION = "vision"  # the model ability (CHATOPS_LLM_ABILITIES) that lets it read image parts
IMAGES_NOT_SHOWN = "(The image is described above: this model is not set up to read images.)"
MAX_ARGUMENT_DEPTH = 64  # nesting a tool call's arguments may have (deeper: not usable)


def parse_arguments(raw: str | Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Arguments as a dict, or None when the model sent something that is not a JSON object
    (or one nested so deep that hashing or logging it would exhaust the stack)."""
    if isinstance(raw, Mapping):
        value: Any = dict(raw)
    elif raw is None or not raw.strip():
        return {}
    else:
        try:
            value = json.loads(raw)
        except (ValueError, RecursionError):  # RecursionError: nested deeper than Python parses
            return None
    if not isinstance(value, dict) or _too_deep(value):
        return None
    return value


def _too_deep(value: Any) -> bool:
    level: list[Any] = [value]
    for _ in range(MAX_ARGUMENT_DEPTH):
        level = [
            child
            for node in level
            for child in (node.values() if isinstance(node, dict) else node)
            if isinstance(child, dict | list)
        ]
        if not level:
            return False
    return True


async def execute_call(
    scope: RunScope,
    call_id: str,
    name: str,
    raw_args: str | Mapping[str, Any] | None,
    reasoning: str = "",
    *,
    batch: str = "",
) -> CallOutcome:
    """Run one call through the hooks and record it as a step (events included); `batch`:
    the calls of the same model response share it (`PreToolUseContext.batch`)."""
    iteration = scope.state.iteration
    args = parse_arguments(raw_args)
    shown_args = args if args is not None else {"_raw": str(raw_args)}
    await scope.send(IterationStart(iteration, name, shown_args, call_id))
    started = time.monotonic()
    fp = fingerprint(name, shown_args)
    tool = scope.tools.get(name)
    blocked = ran = False
    if tool is not None and name == REQUEST_TOOLS and args is not None:
        result = grant_tools(scope, args)  # the engine's own step: no connector, no hook
    elif tool is None:
        available = ", ".join(scope.tools.names()) or "none"
        result = await _malformed(
            scope, unknown_tool(name), call_id, shown_args, fp,
            f"Error: unknown tool '{name[:200]}'. Available tools: {available}.",
        )  # fmt: skip
    elif args is None:
        result = await _malformed(
            scope, tool, call_id, shown_args, fp,
            f"Error: the arguments for '{name}' are not a JSON object: {str(raw_args)[:200]}",
        )  # fmt: skip
    else:
        result, outcome = await _through_hooks(scope, tool, call_id, args, fp, reasoning, batch)
        blocked, ran = outcome == "blocked", outcome in RAN
    elapsed = time.monotonic() - started
    images = result.images if scope.llm.abilities.get(VISION) else ()
    content = result.content
    if result.images and not images:
        content = f"{content}\n{IMAGES_NOT_SHOWN}"
    text = prompts.observation_text(content, is_error=result.is_error)
    error = text if result.is_error else None
    if ran:  # reflection and the checklist count real calls, not refused attempts
        scope.state.tool_calls_made += 1
    scope.state.steps.append(
        StepRecord(iteration, name, shown_args, text, error, blocked, elapsed, call_id)
    )
    await scope.send(IterationDone(iteration, name, text, error, blocked, elapsed, call_id))
    return CallOutcome(call_id, name, text, fp, ran, images)


async def _malformed(
    scope: RunScope, tool: Tool, call_id: str, args: dict[str, Any], fp: str, error: str
) -> ToolResult:
    """An attempt that cannot run (unknown tool, arguments that are not an object) still goes
    through the PostToolUse hooks, so it is one call-log row like every other attempt."""
    post = PostToolUseContext(
        tool=tool, tool_call_id=call_id, args=args, fingerprint=fp, run=scope.context,
        result=ToolResult.error(error), outcome="invalid",
        requesters=tuple(scope.state.requesters),
    )  # fmt: skip
    return await scope.hooks.run_post(post)


async def _through_hooks(
    scope: RunScope,
    tool: Tool,
    call_id: str,
    args: dict[str, Any],
    fp: str,
    reasoning: str,
    batch: str = "",
) -> tuple[ToolResult, Outcome]:
    requesters = tuple(scope.state.requesters)  # as of this call: later interrupts add more
    pre = PreToolUseContext(
        tool=tool, tool_call_id=call_id, args=args, fingerprint=fp, run=scope.context,
        reasoning=reasoning, requesters=requesters, clock=scope.clock, batch=batch,
    )  # fmt: skip
    problem = argument_problem(tool.name, tool.argument_schema, args)
    if _stopped(scope):  # a person stopped the run: nothing more is started
        decision = PreToolDecision(allowed=False, args=args, reason=STOPPED, blocked_by="stop")
    elif problem is not None:  # before any hook: no approval is asked for a call that cannot run
        decision = PreToolDecision(
            allowed=False, args=args, reason=problem, blocked_by=ARGUMENT_CHECK
        )
    else:
        decision = await scope.hooks.run_pre(pre)
        if decision.allowed and _stopped(scope):  # approved just as the run was stopped
            decision = PreToolDecision(allowed=False, args=args, reason=STOPPED, blocked_by="stop")
    started = time.monotonic()
    outcome: Outcome
    if not decision.allowed:
        result = ToolResult.error(decision.reason or f"Blocked: '{tool.name}' was not allowed.")
        outcome = "blocked"
    elif decision.replay is not None:
        result, outcome = decision.replay, "replayed"
    else:
        approval = decision.notes.get(ApprovalNote)
        iteration = scope.state.iteration

        async def progress(done: float, total: float | None, message: str) -> None:
            await scope.send(ToolProgress(iteration, tool.name, call_id, done, total, message))

        audience = Audience(
            platform=scope.context.platform,
            workspace=scope.context.workspace,
            channel=scope.context.channel,
            direct=scope.context.direct,
            requester=scope.context.requester,
            requesters=requesters,
            approvers=approval.approvers if approval is not None else (),
            progress=progress,
            ask=_asker(scope, requesters),
        )
        result = await _invoke(tool, dict(decision.args), audience)
        outcome = "error" if result.is_error else "executed"
        if document_type(result) is not None:  # a document: the user gets it, not the model
            artifact = as_artifact(result, tool.name, call_id, scope.state.artifact_names())
            scope.state.artifacts.append(artifact)
            result = ToolResult(artifact_observation(artifact))
    post = PostToolUseContext(
        tool=tool,
        tool_call_id=call_id,
        args=decision.args,
        fingerprint=fingerprint(tool.name, decision.args) if decision.args is not args else fp,
        run=scope.context,
        result=result,
        outcome=outcome,
        duration_s=time.monotonic() - started,
        blocked_by=decision.blocked_by,
        notes=decision.notes,
        requesters=requesters,
    )
    return await scope.hooks.run_post(post), outcome


def _asker(scope: RunScope, requesters: tuple[str, ...]) -> AskUser | None:
    """The run's `ask` port bound to the requesters as of this call: only they may answer."""
    ask = scope.context.ask
    if ask is None:
        return None

    async def asking(question: Question) -> Reply:
        return await ask(question, requesters)

    return asking


async def _invoke(tool: Tool, args: dict[str, Any], audience: Audience) -> ToolResult:
    """The tool itself; an exception becomes an error observation with secrets masked."""
    try:
        if tool.invoke_for is not None:
            result = await tool.invoke_for(audience, args)
        else:
            result = await tool.invoke(args)
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # noqa: BLE001 - a failing tool is an observation, not a crash
        message = _mask(f"Error: the tool '{tool.name}' failed: {type(exc).__name__}: {exc}", tool)
        log.info("tool %s raised %s", tool.name, type(exc).__name__)
        if log.isEnabledFor(logging.DEBUG):  # the traceback, masked like the observation
            log.debug("%s", _mask("".join(traceback.format_exception(exc)), tool))
        return ToolResult.error(message)
    if not isinstance(result, ToolResult):
        return ToolResult(content=str(result))
    return result


def _stopped(scope: RunScope) -> bool:
    return scope.stop is not None and scope.stop.requested


def _mask(text: str, tool: Tool) -> str:
    try:
        secrets = [value for value in tool.secret_values() if value and len(value) >= 4]
    except Exception:  # noqa: BLE001 - no secret list: mask nothing rather than fail the call
        log.warning("secret_values() of %s failed", tool.name, exc_info=True)
        return text
    for secret in secrets:
        text = text.replace(secret, "[REDACTED]")
    return text
