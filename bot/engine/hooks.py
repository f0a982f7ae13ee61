"""HookRegistry: PreToolUse and PostToolUse hooks around every tool call.

Hooks run outside the LLM loop, so nothing the model says can skip them. The registry is the one
place that turns a hook's exception into a block (fail closed), naming the hook.
"""

from __future__ import annotations

import fnmatch
import logging
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from typing import Any, Generic, Literal, TypeVar

from bot.engine.budget import RunClock
from bot.engine.notes import ApprovalNote, Notes
from bot.engine.tools import Question, Reply, Tool, ToolResult, fingerprint

log = logging.getLogger(__name__)

DepsT = TypeVar("DepsT")


@dataclass(frozen=True, kw_only=True)
class RunContext(Generic[DepsT]):
    """Who and where a run is for; the engine passes it through to hooks untouched.

    `requester` started the run; `requesters` are everyone whose messages the run reads from
    the start (the starter, the authors of the thread history it is given). The engine adds
    each interrupter as it reads them; hooks see the set as of each call (`ctx.requesters`).
    `direct`: the conversation is a direct message (only its one user sees it).
    `deps`: what the runtime gives its hooks for this run (pydantic-ai's `RunContext[Deps]`):
    a type the engine does not know (`bot.runs.deps.RunDeps` under `chatops serve`), None when
    the caller gives none. `on_read`: told the authors of the replies the engine drains into the
    model's context, as it drains them (the runtime lets them stop the run from then on).
    """

    run_id: str = ""
    requester: str = ""
    requesters: tuple[str, ...] = ()
    conversation_id: int | None = None
    platform: str = ""
    workspace: str = ""  # the platform's workspace (Slack team, Feishu tenant): opaque here
    channel: str = ""
    direct: bool = False
    deps: DepsT = None  # type: ignore[assignment]  # no deps: a RunContext[None]
    on_read: Callable[[tuple[str, ...]], None] | None = field(default=None, compare=False)
    # asks the given requesters a tool's question in the run's thread (`bot.elicitation`);
    # None: the run has nowhere to ask (a tool's question is cancelled)
    ask: Callable[[Question, tuple[str, ...]], Awaitable[Reply]] | None = field(
        default=None, compare=False
    )

    @property
    def initial_requesters(self) -> tuple[str, ...]:
        """The starter first, then the others, each once."""
        return tuple(dict.fromkeys(p for p in (self.requester, *self.requesters) if p))


def _default_requesters(ctx: PreToolUseContext[Any] | PostToolUseContext[Any]) -> None:
    """A context built without requesters (outside the engine) gets the run's initial ones."""
    if not ctx.requesters:
        object.__setattr__(ctx, "requesters", ctx.run.initial_requesters)


@dataclass(frozen=True, kw_only=True)
class PreToolUseContext(Generic[DepsT]):
    """Everything a PreToolUse hook needs to decide about one tool call."""

    tool: Tool
    tool_call_id: str
    args: Mapping[str, Any]
    fingerprint: str
    run: RunContext[DepsT]
    reasoning: str = ""
    notes: Notes = Notes()  # what the hooks before this one noted
    requesters: tuple[str, ...] = ()  # everyone whose messages the run had read at this call
    # the calls of one model response that asked for several share it (the run and the step:
    # an approval gate puts them on one card); '' for a call made alone
    batch: str = ""
    clock: RunClock = field(default_factory=RunClock, repr=False, compare=False)

    def __post_init__(self) -> None:
        _default_requesters(self)

    def waiting_for_human(self) -> AbstractContextManager[None]:
        """Wrap a wait for a person (an approval card, a prompt): the run's time budget
        (`REACT_RUN_TIMEOUT_S`) does not count the time spent inside."""
        return self.clock.human_wait()


# invalid: the model's call could not even be attempted (unknown tool, arguments not an object)
Outcome = Literal["executed", "error", "blocked", "replayed", "invalid"]


@dataclass(frozen=True, kw_only=True)
class PostToolUseContext(Generic[DepsT]):
    """One finished attempt: executed, failed or blocked, with what the PreToolUse hooks noted."""

    tool: Tool
    tool_call_id: str
    args: Mapping[str, Any]
    fingerprint: str
    run: RunContext[DepsT]
    result: ToolResult
    outcome: Outcome
    duration_s: float = 0.0
    blocked_by: str = ""
    notes: Notes = Notes()
    requesters: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _default_requesters(self)


@dataclass(frozen=True)
class HookResult:
    """A hook's answer; build it with `allow()`, `block(reason)`, `replay(result)` or
    `rewrite(...)`. `note`: a typed note for the hooks after this one (e.g. `ApprovalNote`)."""

    allowed: bool = True
    reason: str = ""
    args: Mapping[str, Any] | None = None
    result: ToolResult | None = None
    note: object | None = None

    @classmethod
    def allow(cls, *, note: object | None = None) -> HookResult:
        return cls(note=note)

    @classmethod
    def block(cls, reason: str, *, note: object | None = None) -> HookResult:
        return cls(allowed=False, reason=reason, note=note)

    @classmethod
    def replay(cls, result: ToolResult, *, note: object | None = None) -> HookResult:
        """Skip execution and use a recorded result (a resumed run must not run a tool twice)."""
        return cls(result=result, note=note)

    @classmethod
    def rewrite(
        cls,
        *,
        args: Mapping[str, Any] | None = None,
        result: ToolResult | None = None,
        note: object | None = None,
    ) -> HookResult:
        return cls(args=args, result=result, note=note)


PreHook = Callable[[PreToolUseContext[Any]], Awaitable[HookResult]]
PostHook = Callable[[PostToolUseContext[Any]], Awaitable[HookResult]]


@dataclass(frozen=True)
class PreToolDecision:
    """The combined answer of all PreToolUse hooks for one call."""

    allowed: bool
    args: Mapping[str, Any]
    reason: str = ""
    blocked_by: str = ""
    notes: Notes = Notes()
    replay: ToolResult | None = None


@dataclass(frozen=True)
class _Registered:
    name: str
    priority: int
    tools: str
    hook: Callable[[Any], Awaitable[HookResult]]

    def applies_to(self, tool_name: str) -> bool:
        return fnmatch.fnmatchcase(tool_name, self.tools)


class HookRegistry:
    """Ordered hooks (lower priority runs first; ties keep insertion order)."""

    def __init__(self) -> None:
        self._pre: list[_Registered] = []
        self._post: list[_Registered] = []

    def add_pre(
        self, hook: PreHook, *, name: str = "", priority: int = 100, tools: str = "*"
    ) -> None:
        self._pre.append(_Registered(name or _name_of(hook), priority, tools, hook))
        self._pre.sort(key=lambda item: item.priority)

    def add_post(
        self, hook: PostHook, *, name: str = "", priority: int = 100, tools: str = "*"
    ) -> None:
        self._post.append(_Registered(name or _name_of(hook), priority, tools, hook))
        self._post.sort(key=lambda item: item.priority)

    def pre_hook_names(self) -> list[str]:
        return [item.name for item in self._pre]

    def post_hook_names(self) -> list[str]:
        return [item.name for item in self._post]

    async def run_pre(self, ctx: PreToolUseContext[Any]) -> PreToolDecision:
        """Run PreToolUse hooks in order; the first block stops the chain; a raise blocks.

        A hook may rewrite the arguments (later hooks see the rewrite) or `replay` a recorded
        result, which also ends the chain: the engine then uses that result without executing.
        A rewrite after a hook bound the arguments (`ApprovalNote.bound_fingerprint`, written by
        the approval gate) blocks.
        """
        notes = ctx.notes
        for item in self._pre:
            if not item.applies_to(ctx.tool.name):
                continue
            if ctx.notes != notes:  # each hook sees what the hooks before it noted
                ctx = replace(ctx, notes=notes)
            try:
                outcome = await item.hook(ctx)
            except Exception:  # noqa: BLE001 - fail closed: any hook error blocks the call
                log.exception("PreToolUse hook %s failed; blocking %s", item.name, ctx.tool.name)
                return PreToolDecision(
                    allowed=False,
                    args=ctx.args,
                    reason=f"Blocked: the check '{item.name}' failed, so the call did not run.",
                    blocked_by=item.name,
                    notes=notes,
                )
            if outcome.note is not None:
                notes = notes.add(outcome.note)
            if not outcome.allowed:
                return PreToolDecision(
                    allowed=False,
                    args=ctx.args,
                    reason=outcome.reason,
                    blocked_by=item.name,
                    notes=notes,
                )
            if outcome.result is not None:
                return PreToolDecision(
                    allowed=True, args=ctx.args, notes=notes, replay=outcome.result
                )
            if outcome.args is not None:
                args = dict(outcome.args)
                ctx = replace(
                    ctx, args=args, fingerprint=fingerprint(ctx.tool.name, args), notes=notes
                )
                approval = notes.get(ApprovalNote)
                bound = approval.bound_fingerprint if approval is not None else ""
                if bound and bound != ctx.fingerprint:
                    return PreToolDecision(
                        allowed=False,
                        args=ctx.args,
                        reason=(
                            f"Blocked: the check '{item.name}' changed the arguments of "
                            f"`{ctx.tool.name}` after they were approved, so the call did not run."
                        ),
                        blocked_by=item.name,
                        notes=notes,
                    )
        return PreToolDecision(allowed=True, args=ctx.args, notes=notes)

    async def run_post(self, ctx: PostToolUseContext[Any]) -> ToolResult:
        """Run PostToolUse hooks in order, each seeing the previous rewrite.

        A failing PostToolUse hook must not pass an unfiltered result on: it yields an error
        result that names the hook instead.
        """
        for item in self._post:
            if not item.applies_to(ctx.tool.name):
                continue
            try:
                outcome = await item.hook(ctx)
            except Exception:  # noqa: BLE001 - fail closed: withhold the unfiltered result
                log.exception("PostToolUse hook %s failed for %s", item.name, ctx.tool.name)
                ctx = replace(
                    ctx,
                    result=ToolResult.error(
                        f"The result was withheld: the post-processing check '{item.name}' failed."
                    ),
                )
                continue
            if outcome.result is not None:
                ctx = replace(ctx, result=outcome.result)
        return ctx.result


def _name_of(hook: object) -> str:
    return getattr(hook, "name", None) or getattr(hook, "__name__", None) or type(hook).__name__
