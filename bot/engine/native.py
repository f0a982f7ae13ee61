"""Native function-calling mode: the model returns structured `tool_calls`.

All calls of one response run in parallel (`asyncio.gather`), and every tool result is appended
right after the assistant message, before anything else: the API rejects any other message
between a `tool_calls` message and its results. So interrupts, cycle warnings and reflections
are appended only after the last tool result.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from bot.engine import prompts, rules
from bot.engine.events import ThinkingDone
from bot.engine.execution import execute_call
from bot.engine.scope import CONTINUE, RunScope

T = TypeVar("T")


async def native_step(scope: RunScope) -> bool:
    """One iteration; True when the run has its final answer."""
    state = scope.state
    reply = await scope.call_model(tools=scope.schemas)
    await scope.send(ThinkingDone(state.iteration, reply.reasoning_content or ""))
    if reply.tool_calls:
        entries = [
            prompts.tool_call_entry(state.claim_call_id(c.id), c.name, c.arguments)
            for c in reply.tool_calls
        ]
        state.append(prompts.assistant(reply.content, entries))
        state.checklist_pending = False  # the agent went back to work: its next answer counts
        await scope.checkpoint()
        await run_pending_calls(scope, reply.reasoning_content or reply.content or "")
        return CONTINUE
    text = reply.content or ""
    state.append(prompts.assistant(text))
    return await scope.offer_answer(text, interrupted=await scope.drain_interrupts())


async def gather_or_cancel(*calls: Coroutine[Any, Any, T]) -> list[T]:
    """`asyncio.gather`, except that when one call raises, the others are cancelled (and
    awaited) before the error propagates: a run that fails leaves no call behind it, still
    waiting for an approval or about to run a tool."""
    tasks = [asyncio.ensure_future(call) for call in calls]
    try:
        return await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


async def run_pending_calls(scope: RunScope, reasoning: str) -> None:
    """Execute the unanswered calls in parallel, append results in call order, then inject."""
    state = scope.state
    pending = scope.state.unanswered_calls()
    before = state.tool_calls_made
    # several calls of one response: a batch (their approvals share one card), named by the
    # run and the step, so a run resumed after a restart names it the same
    batch = f"{scope.context.run_id}:{state.iteration}" if len(pending) > 1 else ""
    outcomes = await gather_or_cancel(
        *(
            execute_call(
                scope, call["id"], call["function"]["name"], call["function"]["arguments"],
                reasoning, batch=batch,
            )
            for call in pending
        )
    )  # fmt: skip
    for outcome in outcomes:
        state.append(prompts.tool_result(outcome.call_id, outcome.observation))
    if shown := [(o.name, o.images) for o in outcomes if o.images]:
        state.append(prompts.tool_images(shown))  # after every result: the API insists
    await scope.drain_interrupts()
    calls = [(outcome.name, outcome.fingerprint) for outcome in outcomes]
    for text in rules.injections(state, scope.limits, calls, before):
        state.append(prompts.user(text))
