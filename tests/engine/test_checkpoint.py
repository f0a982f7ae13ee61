"""Checkpoints (on_checkpoint) and resume_from: a restored run finishes its pending calls once."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from bot.engine.agent import ReActAgent
from bot.engine.hooks import HookRegistry, HookResult, PostToolUseContext
from bot.engine.tools import ToolResult
from tests.engine.helpers import echo_tool, registry
from tests.fakes.fixtures import make_llm
from tests.fakes.openai_server import FakeOpenAI, answer, json_action_call, json_final, tool_calls


async def test_failing_checkpoint_store_does_not_stop_the_run(fake_openai: FakeOpenAI) -> None:
    async def broken(state: dict[str, Any]) -> None:
        raise OSError("database is locked")

    fake_openai.script(tool_calls(("a__b", {})), answer("done"))
    agent = ReActAgent(make_llm(fake_openai), registry(echo_tool("a__b")))
    assert (await agent.run("q", on_checkpoint=broken)).answer == "done"


async def _run_until_killed(coro: Any) -> None:
    """Run until the checkpoint callback 'kills the process' (cancels the run, as a shutdown)."""
    task = asyncio.ensure_future(coro)
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_checkpoint_before_tools_and_after_each_iteration(fake_openai: FakeOpenAI) -> None:
    saved: list[dict[str, Any]] = []
    seen_by_tool: list[int] = []

    async def save(state: dict[str, Any]) -> None:
        saved.append(json.loads(json.dumps(state)))  # JSON-serialisable

    async def tool(args: dict[str, Any]) -> ToolResult:
        seen_by_tool.append(len(saved))
        return ToolResult("ok")

    fake_openai.script(tool_calls(("a__b", {}), ("a__b", {"x": 1})), answer("done"))
    agent = ReActAgent(make_llm(fake_openai), registry(echo_tool("a__b", reply=tool)))
    await agent.run("q", on_checkpoint=save)
    assert seen_by_tool == [1, 1]  # the pre-tool checkpoint was stored before any tool ran
    first = saved[0]
    assert first["messages"][-1]["tool_calls"] and first["iteration"] == 1
    assert [s["iteration"] for s in saved] == [1, 1, 2]
    assert saved[1]["messages"][-1]["role"] == "tool"
    assert saved[-1]["answer"] == "done"


async def test_resume_runs_unanswered_calls_once_through_hooks(fake_openai: FakeOpenAI) -> None:
    saved: list[dict[str, Any]] = []
    executed: list[dict[str, Any]] = []
    outcomes: list[str] = []

    async def save(state: dict[str, Any]) -> None:
        saved.append(json.loads(json.dumps(state)))

    async def log(ctx: PostToolUseContext) -> HookResult:
        outcomes.append(ctx.outcome)
        return HookResult.allow()

    tools = registry(echo_tool("ops__restart", executed, reply="restarted"))
    fake_openai.script(tool_calls(("ops__restart", {"id": "api"})))
    agent = ReActAgent(make_llm(fake_openai), tools)

    async def save_then_die(state: dict[str, Any]) -> None:
        await save(state)
        if state["messages"][-1].get("tool_calls"):
            raise asyncio.CancelledError

    await _run_until_killed(agent.run("restart api", on_checkpoint=save_then_die))
    checkpoint = saved[0]
    assert executed == [] and checkpoint["messages"][-1]["tool_calls"]

    hooks = HookRegistry()
    hooks.add_post(log)
    fake_openai.script(answer("Restarted api."))
    resumed = ReActAgent(make_llm(fake_openai), tools, hooks=hooks)
    result = await resumed.run("ignored on resume", resume_from=checkpoint)
    assert executed == [{"id": "api"}]
    assert outcomes == ["executed"]
    assert result.answer == "Restarted api." and result.query == "restart api"
    assert result.iterations == 2
    after = fake_openai.requests[-1]["messages"]
    call_id = checkpoint["messages"][-1]["tool_calls"][0]["id"]
    assert after[-1] == {"role": "tool", "tool_call_id": call_id, "content": "restarted"}


async def test_resume_json_mode_pending_call(fake_openai: FakeOpenAI) -> None:
    saved: list[dict[str, Any]] = []
    executed: list[dict[str, Any]] = []

    async def save_then_die(state: dict[str, Any]) -> None:
        saved.append(json.loads(json.dumps(state)))
        if state["pending_json_call"]:
            raise asyncio.CancelledError

    tools = registry(echo_tool("ops__get", executed, reply="v"))
    llm = make_llm(fake_openai, abilities={})
    fake_openai.script(json_action_call("ops__get", {"id": "1"}))
    await _run_until_killed(ReActAgent(llm, tools).run("q", on_checkpoint=save_then_die))
    assert executed == []
    fake_openai.script(json_final("got v"))
    result = await ReActAgent(llm, tools).run("q", resume_from=saved[-1])
    assert executed == [{"id": "1"}]
    assert result.answer == "got v"
    assert fake_openai.requests[-1]["messages"][-1] == {"role": "user", "content": "Observation: v"}


async def test_resume_after_all_results_just_continues(fake_openai: FakeOpenAI) -> None:
    saved: list[dict[str, Any]] = []
    executed: list[dict[str, Any]] = []

    async def save(state: dict[str, Any]) -> None:
        saved.append(json.loads(json.dumps(state)))

    tools = registry(echo_tool("a__b", executed))
    fake_openai.script(tool_calls(("a__b", {})), answer("first"))
    await ReActAgent(make_llm(fake_openai), tools).run("q", on_checkpoint=save)
    fake_openai.script(answer("second"))
    result = await ReActAgent(make_llm(fake_openai), tools).run("q", resume_from=saved[1])
    assert executed == [{}]  # not executed again
    assert result.answer == "second"


async def test_a_resumed_run_keeps_its_requesters_and_its_call_ids(
    fake_openai: FakeOpenAI,
) -> None:
    """An interrupter read before the stop is still a requester after it; ids used before the
    stop are never handed out again (a repeated server id gets a fresh one)."""
    from bot.engine.hooks import PreToolUseContext, RunContext
    from bot.engine.interrupts import InterruptQueue

    saved: list[dict[str, Any]] = []
    queue = InterruptQueue()
    queue.put("also check web", author="U_LEAD")

    async def save(state: dict[str, Any]) -> None:
        saved.append(json.loads(json.dumps(state)))

    fake_openai.script(tool_calls(("a__b", {})), answer("done"))
    agent = ReActAgent(make_llm(fake_openai), registry(echo_tool("a__b")))
    context = RunContext(requester="U_DEV")
    await agent.run("q", context=context, interrupts=queue, on_checkpoint=save)
    after = saved[-1]
    assert after["requesters"] == ["U_DEV", "U_LEAD"]
    used = set(after["call_ids"])
    assert used  # the call got an id

    seen: list[tuple[str, tuple[str, ...]]] = []

    async def remember(ctx: PreToolUseContext) -> HookResult:
        seen.append((ctx.tool_call_id, ctx.requesters))
        return HookResult.allow()

    hooks = HookRegistry()
    hooks.add_pre(remember)
    repeated = tool_calls(("a__b", {"again": True}))
    repeated.tool_calls[0]["id"] = sorted(used)[0]  # the server repeats an old id
    fake_openai.script(repeated, answer("done again"))
    resumed = after | {"answer": ""}
    agent = ReActAgent(make_llm(fake_openai), registry(echo_tool("a__b")), hooks=hooks)
    await agent.run("q", context=context, resume_from=resumed)
    [(call_id, requesters)] = seen
    assert call_id not in used
    assert requesters == ("U_DEV", "U_LEAD")
