"""ReActAgent: the tool loop (`run`) and the streamed answer synthesis (`stream_answer`).

The agent is configuration (llm, tools, hooks, limits); every run gets its own `RunState`, so one
instance serves concurrent runs. `run()`:
1. restores a checkpoint (`resume_from`) and finishes its unanswered tool calls, or builds the
   messages and, with many tools, selects a subset with one cheap call;
2. loops at most `max_iterations` times: compact the context if needed, one non-streaming model
   call, then tools (native mode, in parallel) or one JSON action (JSON mode), with hooks around
   every call, cycle warnings, reflections, the completion checklist and user interrupts;
3. on exhaustion of its iterations, its working time (human waits excluded) or its tokens,
   answers with a summary of what was done and why it stopped;
4. when a person stops it (`stop`), abandons the model call in flight, lets a tool that has
   started finish, runs nothing more and raises `RunStopped`.
A model that cannot be reached ends the run with a clear message (`stopped="error"`, the
`LLMError` in `AgentResult.failure`: the caller reports the run as failed, never as an answer);
nothing a model or a tool does raises out of `run()`. `synthesize` raises an `LLMError` that is
`permanent` (the key refused, no such model): a configuration error is never hidden behind the
loop's answer; a transient one (a stream that broke) falls back to it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Sequence
from typing import Any

from bot.engine import prompts
from bot.engine.agent_limits import EngineLimits
from bot.engine.budget import Now, RunBudgetExceeded, RunClock
from bot.engine.events import (
    AnswerDelta,
    AnswerDone,
    AnswerReset,
    AnswerStart,
    Done,
    Emit,
    Phase,
    emit_safely,
)
from bot.engine.hooks import HookRegistry, RunContext
from bot.engine.interrupts import InterruptQueue
from bot.engine.json_mode import json_step, run_pending_json_call
from bot.engine.llm import LLM, LLMError
from bot.engine.native import native_step, run_pending_calls
from bot.engine.scope import RunScope
from bot.engine.selection import needs_selection, select_tools
from bot.engine.state import AgentResult, RunState, StepRecord, Stopped
from bot.engine.stopping import StopSignal
from bot.engine.tool_requests import REQUEST_TOOLS, request_tools_tool
from bot.engine.tools import ToolRegistry

__all__ = ["AgentResult", "ReActAgent", "StepRecord"]
# how a run may end without a synthesis call: its own answer says what happened
NO_SYNTHESIS: frozenset[Stopped] = frozenset({"error", "timeout", "token_budget"})

log = logging.getLogger(__name__)


class ReActAgent:
    """A model, its tools and the rules around them; `run()` for each request."""

    def __init__(
        self,
        llm: LLM,
        tools: ToolRegistry,
        *,
        hooks: HookRegistry | None = None,
        limits: EngineLimits = EngineLimits(),  # noqa: B008 - frozen, shared safely
        system_prompt: str | None = None,
        use_native_tools: bool = True,
        completion_check: bool = True,
        compact_llm: LLM | None = None,
        clock: Now = time.monotonic,
    ) -> None:
        """`compact_llm`: the model that summarises older turns when the context is over budget
        (a cheaper one may do; default: `llm`). `clock`: what the run's time budget reads."""
        self._llm = llm
        self.compact_llm = compact_llm
        self.clock = clock
        self.tools = tools
        self.hooks = hooks if hooks is not None else HookRegistry()
        self.limits = limits
        self.system_prompt = system_prompt
        self.use_native_tools = use_native_tools
        self.completion_check = completion_check

    @property
    def llm(self) -> LLM:
        return self._llm

    @property
    def native_mode_active(self) -> bool:
        """Native function calling needs both the agent's consent and the model's ability."""
        return self.use_native_tools and bool(self._llm.abilities.get("tool_call"))

    async def run(
        self,
        query: str,
        *,
        history: Sequence[dict[str, Any]] = (),
        context: RunContext[Any] | None = None,
        interrupts: InterruptQueue | None = None,
        emit: Emit | None = None,
        on_checkpoint: Callable[[dict[str, Any]], Awaitable[None]] | None = None,
        resume_from: dict[str, Any] | None = None,
        stop: StopSignal | None = None,
        connectors: Collection[str] | None = None,
    ) -> AgentResult:
        """Run the tool loop for `query` (or continue a checkpointed run) to an answer;
        `RunStopped` when `stop` is requested (see `bot.engine.stopping`). `connectors`: the
        only connectors whose tools the run may use (a trigger's list; None: every one); a
        resumed run keeps the tools it started with."""
        clock = RunClock(self.clock)
        if resume_from is not None:
            state = RunState.from_dict(resume_from)
            names = state.tool_names
            tools = self.tools.snapshot() if names is None else self.tools.subset(names)
            pool = None  # a resumed run may ask again only for the tools it has
            if names is not None and REQUEST_TOOLS in names:
                tools.register(request_tools_tool())
        else:
            state, tools, pool = await self._new_state(query, history, emit, connectors)
        clock = RunClock(  # a resumed run goes on counting from where it stopped
            self.clock, elapsed_before=state.elapsed_before + clock.elapsed,
            waited_before=state.waited_before,
        )  # fmt: skip
        context = context if context is not None else RunContext()
        state.add_requesters(context.initial_requesters)  # a resumed run keeps its own as well
        scope = RunScope(
            llm=self._llm,
            tools=tools,
            hooks=self.hooks,
            limits=self.limits,
            state=state,
            context=context,
            completion_check=self.completion_check,
            emit=emit,
            interrupts=interrupts,
            on_checkpoint=on_checkpoint,
            compact_llm=self.compact_llm,
            clock=clock,
            stop=stop,
            pool=pool,
        )
        stopped, failure = await self._loop(scope, resuming=resume_from is not None)
        return AgentResult(
            failure=failure,
            query=state.query,
            answer=state.answer,
            messages=state.messages,
            iterations=state.iteration,
            usage=state.usage,
            elapsed=scope.elapsed,
            steps=state.steps,
            stopped=stopped,
            artifacts=list(state.artifacts),
            late_interrupts=list(state.late_interrupts),
        )

    async def _new_state(
        self,
        query: str,
        history: Sequence[dict[str, Any]],
        emit: Emit | None,
        connectors: Collection[str] | None = None,
    ) -> tuple[RunState, ToolRegistry, ToolRegistry | None]:
        """The run's first state, its tools, and the pool `request_tools` draws from when
        selection narrowed them (None: the run has every tool it may use)."""
        tools = self.tools.snapshot()  # tools registered later (an MCP server that came up) wait
        state = RunState(
            query=query, mode="native" if self.native_mode_active else "json", messages=[]
        )
        if connectors is not None:  # checkpointed as the run's tools: a resumed run keeps them
            tools = tools.subset(t.name for t in tools if t.connector in connectors)
            state.tool_names = tools.names()
        pool: ToolRegistry | None = None
        if needs_selection(tools, self.limits):
            await emit_safely(emit, Phase("selecting_tools", len(tools)))
            selection = await select_tools(self._llm, query, tools, self.limits)
            state.usage = state.usage + selection.usage
            if selection.selected or len(selection.tools) < len(tools):
                pool, tools = tools, selection.tools  # picked, or what fits in one request
                if len(tools) < self.limits.max_tools_per_request:
                    tools.register(request_tools_tool())  # the way out of a wrong pick
                state.tool_names = tools.names()
        prompt = prompts.system_prompt(self.system_prompt, tools, json_mode=state.mode == "json")
        state.append(prompts.system(prompt), pinned=True)
        for message in history:  # prior thread turns: plain text only, no stale tool traffic
            if message.get("role") in ("user", "assistant") and message.get("content"):
                state.append({"role": message["role"], "content": str(message["content"])})
        state.append(prompts.user(query), pinned=True)
        return state, tools, pool

    async def _loop(self, scope: RunScope, *, resuming: bool) -> tuple[Stopped, LLMError | None]:
        state = scope.state
        step = native_step if state.mode == "native" else json_step
        try:
            if resuming:
                await self._finish_pending(scope)
            while state.iteration < self.limits.max_iterations:
                scope.check_stop()
                state.iteration += 1
                finished = await step(scope)
                await scope.checkpoint()
                scope.check_stop()  # a tool that finished after a stop: its result is not read
                if finished:
                    return "answer", None
        except LLMError as exc:
            log.warning("run ended: %s", exc)
            state.answer = f"I could not complete this request: {exc.user_message}."
            return "error", exc
        except RunBudgetExceeded as exc:
            log.info("run stopped: %s", exc.detail)
            state.answer = prompts.fallback_summary(
                state.iteration, state.trace(), why=f"I stopped because {exc.detail}"
            )
            return exc.reason, None
        state.answer = prompts.fallback_summary(state.iteration, state.trace())
        return "max_iterations", None

    async def _finish_pending(self, scope: RunScope) -> None:
        """A restored run first executes the calls it had asked for but not yet run."""
        state = scope.state
        if state.mode == "native" and state.unanswered_calls():
            await run_pending_calls(scope, "")
            await scope.checkpoint()
        elif state.mode == "json" and state.pending_json_call is not None:
            await run_pending_json_call(scope)
            await scope.checkpoint()

    async def stream_answer(self, result: AgentResult) -> AsyncIterator[str]:
        """Stream the user-facing answer, synthesised from the trace (results cut per limit)."""
        if result.stopped in NO_SYNTHESIS:
            yield result.answer  # the model is down, or the budget spent: no further call
            return
        trace = [
            (step.tool_name, step.tool_args, step.observation, bool(step.error) or step.blocked)
            for step in result.steps
        ]
        messages = prompts.synthesis_messages(
            result.query, trace, result.answer, self.limits.synthesis_truncate_chars,
            late=result.late_interrupts,
        )  # fmt: skip
        async for delta in self._llm.stream_chat(messages):
            yield delta

    async def synthesize(self, result: AgentResult, *, emit: Emit | None = None) -> str:
        """`stream_answer` with AnswerStart/Delta/Done events; on failure, `result.answer`.

        A stream that fails after some deltas were shown emits `AnswerReset`, so every
        surface replaces the partial text with the fallback instead of appending to it.
        """
        await emit_safely(emit, AnswerStart())
        parts: list[str] = []
        failed = False
        try:
            async for delta in self.stream_answer(result):
                parts.append(delta)
                await emit_safely(emit, AnswerDelta(delta))
        except LLMError as exc:
            if exc.permanent:  # the model's configuration is broken: say so, not a fallback
                raise
            log.warning("answer synthesis failed (%s); using the loop's answer", exc)
            failed = True
        except Exception:  # noqa: BLE001 - the user must always get an answer
            log.warning("answer synthesis failed; using the loop's answer", exc_info=True)
            failed = True
        text = "" if failed else "".join(parts).strip()
        if not text:
            text = result.answer
            if parts:  # something was shown: it is void, the fallback replaces it
                await emit_safely(emit, AnswerReset(text))
            elif text:
                await emit_safely(emit, AnswerDelta(text))
        await emit_safely(emit, AnswerDone())
        await emit_safely(emit, Done(text, result.iterations, result.usage, result.elapsed))
        return text
