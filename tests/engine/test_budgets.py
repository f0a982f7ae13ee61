"""Run budgets (DESIGN §2): working time with human waits excluded, and tokens.

Time is moved by hand (`ManualClock`): a tool or a hook "takes" seconds by advancing it, so no
test sleeps to make time pass. Either budget ends the run with the fallback answer, which says
what was done and why it stopped, and no synthesis call is made after it.
"""

from __future__ import annotations

import asyncio
from typing import Any

from bot.engine.agent import ReActAgent
from bot.engine.agent_limits import EngineLimits
from bot.engine.budget import RunClock
from bot.engine.hooks import HookRegistry, HookResult, PreToolUseContext
from bot.engine.tools import ToolResult
from tests.engine.helpers import Recorder, echo_tool, registry
from tests.fakes.fixtures import make_llm
from tests.fakes.openai_server import FakeOpenAI, Turn, answer, tool_call, tool_calls


class ManualClock:
    """A monotonic clock that only moves when told to."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def _slow_tool(clock: ManualClock, seconds: float):
    async def work(args: dict[str, Any]) -> ToolResult:
        clock.advance(seconds)  # the tool worked this long
        return ToolResult(f"checked {args.get('id')}")

    return echo_tool("ops__check", reply=work)


def _approval_hook(clock: ManualClock, seconds: float, *, says_human: bool):
    """Stands in for the approval gate: the approver takes `seconds` to answer."""

    async def gate(ctx: PreToolUseContext) -> HookResult:
        if says_human:
            with ctx.waiting_for_human():
                clock.advance(seconds)
                await asyncio.sleep(0)  # the wait is a real await, as on a card
        else:
            clock.advance(seconds)
        return HookResult.allow()

    hooks = HookRegistry()
    hooks.add_pre(gate, name="approval_gate")
    return hooks


def _gated_agent(fake: FakeOpenAI, clock: ManualClock, *, says_human: bool) -> ReActAgent:
    """10 s of tool work per call, an hour at the gate, a 100 s budget."""
    return ReActAgent(
        make_llm(fake),
        registry(_slow_tool(clock, 10)),
        hooks=_approval_hook(clock, 3600, says_human=says_human),
        limits=EngineLimits(run_timeout_s=100),
        clock=clock,
        completion_check=False,
    )


async def test_the_time_budget_ends_the_run_with_a_fallback_saying_why(
    fake_openai: FakeOpenAI,
) -> None:
    clock = ManualClock()
    fake_openai.script(*(tool_call("ops__check", {"id": str(n)}) for n in range(5)))
    agent = ReActAgent(
        make_llm(fake_openai),
        registry(_slow_tool(clock, 40)),
        limits=EngineLimits(run_timeout_s=100),
        clock=clock,
    )
    events = Recorder()
    result = await agent.run("check everything", emit=events)
    assert result.stopped == "timeout"
    assert len(fake_openai.requests) == 3  # 3 x 40 s of work: no fourth model call
    assert "time budget of 100 s" in result.answer
    assert "waiting for people not counted" in result.answer
    assert "3 tool calls" in result.answer and "ops__check" in result.answer
    text = await agent.synthesize(result, emit=events)
    assert text == result.answer and fake_openai.streamed_requests() == []
    assert events.of("done")[0].answer == result.answer


async def test_time_waiting_for_an_approval_is_not_counted(fake_openai: FakeOpenAI) -> None:
    clock = ManualClock()
    fake_openai.script(
        tool_call("ops__check", {"id": "1"}), tool_call("ops__check", {"id": "2"}), answer("done")
    )
    result = await _gated_agent(fake_openai, clock, says_human=True).run("q")
    assert result.stopped == "answer" and result.answer == "done"
    assert result.elapsed == 2 * 3600 + 2 * 10  # wall time still reports every second


async def test_the_same_wait_not_declared_as_human_is_counted(fake_openai: FakeOpenAI) -> None:
    clock = ManualClock()
    fake_openai.script(tool_call("ops__check", {"id": "1"}), answer("never asked"))
    result = await _gated_agent(fake_openai, clock, says_human=False).run("q")
    assert result.stopped == "timeout" and len(fake_openai.requests) == 1


async def test_parallel_approval_waits_are_excluded_once() -> None:
    """Two calls waiting at the same time for 60 s: 60 s of human time, not 120."""
    clock = ManualClock()
    run = RunClock(clock)
    first, second = run.human_wait(), run.human_wait()
    first.__enter__()
    clock.advance(30)
    second.__enter__()
    clock.advance(30)
    first.__exit__(None, None, None)
    clock.advance(30)
    second.__exit__(None, None, None)
    clock.advance(5)
    assert (run.elapsed, run.waited, run.working) == (95, 90, 5)


async def test_a_model_call_that_outlives_the_time_left_is_cut(fake_openai: FakeOpenAI) -> None:
    """The model never answers (held): the run ends when its time is up, not 4 x 60 s later."""
    fake_openai.hold()
    agent = ReActAgent(make_llm(fake_openai), registry(), limits=EngineLimits(run_timeout_s=0.2))
    result = await asyncio.wait_for(agent.run("q"), 10)
    fake_openai.release()
    assert result.stopped == "timeout" and "time budget" in result.answer
    assert "No tool was called" in result.answer


async def test_the_token_budget_ends_the_run(fake_openai: FakeOpenAI) -> None:
    def costly(turn: Turn) -> Turn:
        return Turn(tool_calls=turn.tool_calls, prompt_tokens=400, completion_tokens=100)

    fake_openai.script(
        *(costly(tool_call("ops__check", {"id": str(n)})) for n in range(3)), answer("never")
    )
    agent = ReActAgent(
        make_llm(fake_openai),
        registry(echo_tool("ops__check")),
        limits=EngineLimits(run_max_tokens=1200),
    )
    result = await agent.run("q")
    assert result.stopped == "token_budget"
    assert len(fake_openai.requests) == 3 and result.usage.total_tokens == 1500
    assert "1,500 of its 1,200 tokens" in result.answer and "3 tool calls" in result.answer
    assert await agent.synthesize(result) == result.answer
    assert fake_openai.remaining == 1 and fake_openai.streamed_requests() == []


async def test_budgets_of_zero_mean_none(fake_openai: FakeOpenAI) -> None:
    clock = ManualClock()
    fake_openai.script(tool_calls(("ops__check", {"id": "1"})), answer("done"))
    agent = ReActAgent(
        make_llm(fake_openai),
        registry(_slow_tool(clock, 10**6)),
        limits=EngineLimits(run_timeout_s=0, run_max_tokens=0),
        clock=clock,
    )
    assert (await agent.run("q")).answer == "done"


async def test_a_resumed_run_keeps_counting_its_time(fake_openai: FakeOpenAI) -> None:
    clock = ManualClock()
    checkpoints: list[dict[str, Any]] = []

    async def keep(state: dict[str, Any]) -> None:
        checkpoints.append(state)

    limits = EngineLimits(run_timeout_s=100)
    fake_openai.script(tool_call("ops__check", {"id": "1"}), answer("done"))
    agent = ReActAgent(
        make_llm(fake_openai),
        registry(_slow_tool(clock, 70)),
        hooks=_approval_hook(clock, 500, says_human=True),
        limits=limits,
        clock=clock,
        completion_check=False,
    )
    await agent.run("q", on_checkpoint=keep)
    saved = checkpoints[1]  # after the first iteration: 70 s of work, 500 s of waiting
    assert (saved["elapsed"], saved["waited"]) == (570, 500)
    fake_openai.script(tool_call("ops__check", {"id": "2"}), answer("too late"))
    resumed = await agent.run("q", resume_from=saved)
    assert resumed.stopped == "timeout"  # 70 s before the restart + 70 s after it
