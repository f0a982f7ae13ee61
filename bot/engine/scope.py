"""RunScope: the collaborators and state of one run, shared by the native and JSON step functions.

`ReActAgent` builds one per `run()`; it owns nothing global. The helpers here are the steps both
modes share: emit an event (a failing emitter is logged, never fatal), checkpoint, call the model
inside the context budget, and drain interrupts into one pinned message.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from bot.engine import prompts
from bot.engine.agent_limits import EngineLimits
from bot.engine.budget import RunBudgetExceeded, RunClock, check_budget, timeout_detail
from bot.engine.compaction import compact
from bot.engine.context import CompactionPlan, ContextGuard, estimate_tokens
from bot.engine.events import (
    AnswerSignal,
    Compact,
    Emit,
    Inject,
    StepEvent,
    ThinkingStart,
    emit_safely,
)
from bot.engine.hooks import HookRegistry, RunContext
from bot.engine.interrupts import InterruptQueue, combine_interrupts
from bot.engine.llm import LLM, LLMResponse
from bot.engine.state import RunState
from bot.engine.stopping import StopSignal
from bot.engine.tools import ToolRegistry

log = logging.getLogger(__name__)

T = TypeVar("T")
Checkpoint = Callable[[dict[str, Any]], Awaitable[None]]
CONTINUE = False  # a step's answer: loop once more (True: the run has its answer)


@dataclass
class RunScope:
    """One run's inputs (llm, tools, hooks, limits, callbacks) next to its `RunState`."""

    llm: LLM
    tools: ToolRegistry
    hooks: HookRegistry
    limits: EngineLimits
    state: RunState
    context: RunContext[Any]
    completion_check: bool
    emit: Emit | None = None
    interrupts: InterruptQueue | None = None
    on_checkpoint: Checkpoint | None = None
    compact_llm: LLM | None = None  # the compaction call's model (None: the run's own)
    clock: RunClock = field(default_factory=RunClock)
    stop: StopSignal | None = None  # a person may stop the run (`bot.engine.stopping`)
    # every tool the run may ask for with `request_tools` (None: only those it has)
    pool: ToolRegistry | None = None
    guard: ContextGuard = field(init=False)
    schemas: list[dict[str, Any]] = field(init=False)

    def __post_init__(self) -> None:
        self.guard = ContextGuard(self.limits.context_budget_tokens)
        self.schemas = self.tools.openai_schemas()

    @property
    def elapsed(self) -> float:
        return self.clock.elapsed

    def check_stop(self) -> None:
        """Raise `RunStopped` when a person asked the run to stop."""
        if self.stop is not None:
            self.stop.check()

    async def send(self, event: StepEvent) -> None:
        if self.emit is not None:
            await emit_safely(self.emit, event)

    async def checkpoint(self) -> None:
        """Hand the state to the runtime; a failing store is logged, the run goes on."""
        if self.on_checkpoint is None:
            return
        try:
            clock = self.clock
            await self.on_checkpoint(self.state.to_dict(elapsed=clock.elapsed, waited=clock.waited))
        except Exception:  # noqa: BLE001 - persistence trouble must not kill a live run
            log.exception("checkpoint callback failed; the run continues")

    async def call_model(
        self,
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        response_format: Mapping[str, Any] | None = None,
    ) -> LLMResponse:
        """Within the run's budgets: compact if over the context budget, then one
        non-streaming call; usage is added to the state. `RunBudgetExceeded` when the run's
        time or tokens are spent, also while a call is under way."""
        state = self.state
        plan = self.guard.plan(state.messages, state.pinned)
        if plan is not None:
            await self.within_budget(lambda: self.compact(plan))
        await self.send(ThinkingStart(state.iteration))
        sent = len(state.messages)
        reply = await self.within_budget(
            lambda: self.llm.chat(
                state.messages,
                tools=tools or None,
                tool_choice="auto" if tools else None,
                response_format=response_format,
            )
        )
        state.usage = state.usage + reply.usage
        self.guard.note_usage(sent, reply.usage.prompt_tokens)
        return reply

    async def within_budget(self, work: Callable[[], Awaitable[T]]) -> T:
        """Refuse to start `work` when a budget is spent; cut it when it outlives the time
        left (no human waits inside a model call: its wall time is all work); abandon it when
        the run is stopped."""
        if self.stop is not None:
            stop, inner = self.stop, work
            work = lambda: stop.race(inner())  # noqa: E731 - the same work, abandoned on a stop
        limits = self.limits
        left = check_budget(
            self.clock,
            self.state.usage.total_tokens,
            timeout_s=limits.run_timeout_s,
            max_tokens=limits.run_max_tokens,
        )
        if left is None:
            return await work()
        deadline = asyncio.timeout(left)
        try:
            async with deadline:
                return await work()
        except TimeoutError:
            if deadline.expired():
                raise RunBudgetExceeded("timeout", timeout_detail(limits.run_timeout_s)) from None
            raise

    async def compact(self, plan: CompactionPlan) -> None:
        """Over the context budget: one model call summarises the older turns (pinned ones
        stay), or the drop-and-note when that call fails."""
        state = self.state
        outcome = await compact(
            self.compact_llm or self.llm,
            plan,
            query=state.query,
            budget_tokens=self.limits.context_budget_tokens,
        )
        state.usage = state.usage + outcome.usage
        self.guard.forget_usage()
        done = outcome.compaction
        state.replace_messages(done.messages, done.pinned)
        after = estimate_tokens(done.messages)
        await self.send(
            Compact(done.original, done.kept, plan.tokens_before, after, outcome.summarized)
        )

    async def drain_interrupts(self) -> list[str]:
        """Append queued user replies as one pinned `[USER INTERRUPT]`; their texts (empty when
        none arrived).

        Their authors become requesters here, when the model is about to read them (not when
        they were queued): every later call is made for them too, and the runtime hears of
        them (`RunContext.on_read`: they may stop the run from now on).
        """
        if self.interrupts is None or not len(self.interrupts):
            return []
        drained = self.interrupts.drain()
        if not drained:
            return []
        authors = tuple(dict.fromkeys(item.author for item in drained if item.author))
        self.state.add_requesters(authors)
        if self.context.on_read is not None and authors:
            try:
                self.context.on_read(authors)
            except Exception:  # noqa: BLE001 - the runtime's bookkeeping must not end a run
                log.exception("the runtime could not note the authors the run read")
        texts = [item.text for item in drained]
        content = combine_interrupts(texts)
        self.state.append(prompts.user(content), pinned=True)
        await self.send(Inject(content))
        return texts

    async def offer_answer(self, text: str, *, interrupted: Sequence[str]) -> bool:
        """The agent wants to finish with `text`: True if it may, CONTINUE to loop once more.

        A pending answer is suppressed by an interrupt while iterations remain (respond to the
        user first); on the last iteration it is kept, and the replies go to the synthesis
        (`state.late_interrupts`). The checklist's own reply is consumed internally; the
        one-time checklist may be due.
        """
        state = self.state
        if interrupted and state.iteration < self.limits.max_iterations:
            return CONTINUE
        state.late_interrupts.extend(interrupted)
        if state.checklist_pending:
            self.consume_checklist_reply()
            return CONTINUE
        if self.checklist_due():
            self.inject_checklist()
            return CONTINUE
        state.answer = text
        await self.send(AnswerSignal())
        return True

    def checklist_due(self) -> bool:
        """The one-time completion check: enough tools used (never none: a conversational reply
        has nothing to verify), not yet sent, budget for the check and the answer turns."""
        state = self.state
        return (
            self.completion_check
            and not state.checklist_sent
            and state.tool_calls_made >= max(1, self.limits.completion_check_min_tools)
            and self.limits.max_iterations - state.iteration >= 2
        )

    def inject_checklist(self) -> None:
        self.state.checklist_sent = True
        self.state.checklist_pending = True
        self.state.append(prompts.user(prompts.CHECKLIST.format(query=self.state.query)))

    def consume_checklist_reply(self) -> None:
        """The checklist's answer is a verification, not the answer: ask for the real one."""
        self.state.checklist_pending = False
        self.state.append(prompts.user(prompts.CHECKLIST_DONE))
