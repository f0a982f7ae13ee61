"""A person stops a run: the model call in flight is abandoned, a tool that has started
finishes (and its PostToolUse hooks see it) but the model never reads its result, nothing
more starts (the real openai SDK against FakeOpenAI)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from bot.engine.agent import ReActAgent
from bot.engine.hooks import HookRegistry, HookResult, PostToolUseContext
from bot.engine.stopping import RunStopped, StopSignal
from bot.engine.tools import ToolResult
from tests.engine.helpers import echo_tool, registry
from tests.fakes.fixtures import make_llm
from tests.fakes.openai_server import FakeOpenAI, answer, tool_call, tool_calls


async def test_a_stop_abandons_the_model_call_in_flight(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(answer("never read"))
    fake_openai.hold()  # the model "thinks" until released
    stop = StopSignal()
    agent = ReActAgent(make_llm(fake_openai), registry(echo_tool("ops__status")))
    run = asyncio.create_task(agent.run("status?", stop=stop))
    await fake_openai.wait_for_requests(1)
    assert stop.request("U_DEV") and not stop.request("U_OTHER")  # the first stop wins
    with pytest.raises(RunStopped) as raised:
        await asyncio.wait_for(run, 10)
    assert raised.value.by == "U_DEV"
    fake_openai.release()


async def test_a_running_tool_finishes_and_is_logged_but_nothing_more_runs(
    fake_openai: FakeOpenAI,
) -> None:
    started, hold = asyncio.Event(), asyncio.Event()
    slow_calls: list[dict[str, Any]] = []
    later_calls: list[dict[str, Any]] = []

    async def slow(args: dict[str, Any]) -> ToolResult:
        started.set()
        await hold.wait()
        return ToolResult("restarted")

    seen: list[PostToolUseContext] = []

    async def record(ctx: PostToolUseContext) -> HookResult:
        seen.append(ctx)
        return HookResult.allow()

    hooks = HookRegistry()
    hooks.add_post(record, name="call_log")
    fake_openai.script(tool_call("ops__restart", {"id": "api"}), tool_call("ops__later", {}))
    tools = registry(
        echo_tool("ops__restart", slow_calls, reply=slow), echo_tool("ops__later", later_calls)
    )
    stop = StopSignal()
    agent = ReActAgent(make_llm(fake_openai), tools, hooks=hooks)
    run = asyncio.create_task(agent.run("restart api", stop=stop))
    await asyncio.wait_for(started.wait(), 10)
    stop.request("U_DEV")
    await asyncio.sleep(0)  # the stop is seen while the tool is still running ...
    assert not run.done()
    hold.set()  # ... which then finishes
    with pytest.raises(RunStopped):
        await asyncio.wait_for(run, 10)
    assert slow_calls == [{"id": "api"}] and later_calls == []
    assert [(c.tool.name, c.outcome, c.result.content) for c in seen] == [
        ("ops__restart", "executed", "restarted")
    ]
    assert len(fake_openai.requests) == 1  # the model never read the tool's result
    assert fake_openai.remaining == 1


async def test_calls_not_yet_started_are_refused_and_logged_as_stopped(
    fake_openai: FakeOpenAI,
) -> None:
    """Two calls of one response: the first is still in its PreToolUse hook (a human's
    approval) when the stop comes; neither tool runs, both attempts are logged blocked."""
    gate_reached = asyncio.Event()
    stop = StopSignal()

    async def approval(ctx: Any) -> HookResult:
        gate_reached.set()
        await stop.wait()  # the runtime ends the approval wait when a run is stopped
        return HookResult.block("cancelled: the run was stopped")

    seen: list[PostToolUseContext] = []

    async def record(ctx: PostToolUseContext) -> HookResult:
        seen.append(ctx)
        return HookResult.allow()

    hooks = HookRegistry()
    hooks.add_pre(approval, name="approval_gate")
    hooks.add_post(record, name="call_log")
    ran: list[dict[str, Any]] = []
    fake_openai.script(tool_calls(("ops__restart", {"id": "a"}), ("ops__restart", {"id": "b"})))
    agent = ReActAgent(make_llm(fake_openai), registry(echo_tool("ops__restart", ran)), hooks=hooks)
    run = asyncio.create_task(agent.run("restart a and b", stop=stop))
    await asyncio.wait_for(gate_reached.wait(), 10)
    stop.request("U_LEAD")
    with pytest.raises(RunStopped):
        await asyncio.wait_for(run, 10)
    assert ran == []
    assert sorted(c.outcome for c in seen) == ["blocked", "blocked"]
    assert len(fake_openai.requests) == 1
