"""Hooks around every call the agent makes: block, rewrite, replay, fail closed."""

from __future__ import annotations

from typing import Any

from bot.engine.agent import ReActAgent
from bot.engine.hooks import (
    HookRegistry,
    HookResult,
    PostToolUseContext,
    PreToolUseContext,
    RunContext,
)
from bot.engine.tools import ToolResult
from tests.engine.helpers import Recorder, echo_tool, registry
from tests.fakes.fixtures import make_llm
from tests.fakes.openai_server import FakeOpenAI, answer, json_action_call, json_final, tool_call


def _post_recorder(seen: list[PostToolUseContext]):
    async def record(ctx: PostToolUseContext) -> HookResult:
        seen.append(ctx)
        return HookResult.allow()

    return record


async def test_raising_pre_hook_blocks_the_call(fake_openai: FakeOpenAI) -> None:
    calls: list[dict[str, Any]] = []

    async def broken(ctx: PreToolUseContext) -> HookResult:
        raise RuntimeError("approval store down")

    seen: list[PostToolUseContext] = []
    hooks = HookRegistry()
    hooks.add_pre(broken, name="approval_gate")
    hooks.add_post(_post_recorder(seen), name="call_log")
    fake_openai.script(tool_call("ops__restart", {"id": "api"}), answer("could not restart"))
    events = Recorder()
    agent = ReActAgent(
        make_llm(fake_openai), registry(echo_tool("ops__restart", calls)), hooks=hooks
    )
    result = await agent.run("restart api", emit=events)
    assert calls == []
    observation = fake_openai.requests[1]["messages"][-1]
    assert observation["role"] == "tool"
    assert "approval_gate" in observation["content"] and "did not run" in observation["content"]
    assert [(c.outcome, c.blocked_by) for c in seen] == [("blocked", "approval_gate")]
    done = events.of("iteration_done")[0]
    assert done.blocked is True and done.error
    assert result.steps[0].blocked is True


async def test_block_reason_reaches_the_model(fake_openai: FakeOpenAI) -> None:
    async def read_only(ctx: PreToolUseContext) -> HookResult:
        return HookResult.block("The organisation is in read-only mode.")

    hooks = HookRegistry()
    hooks.add_pre(read_only, tools="ops__*")
    fake_openai.script(tool_call("ops__restart", {}), answer("read-only"))
    await ReActAgent(make_llm(fake_openai), registry(echo_tool("ops__restart")), hooks=hooks).run(
        "q"
    )
    assert "read-only mode" in fake_openai.requests[1]["messages"][-1]["content"]


async def test_hooks_rewrite_arguments_and_results(fake_openai: FakeOpenAI) -> None:
    calls: list[dict[str, Any]] = []
    seen: list[PostToolUseContext] = []
    contexts: list[RunContext] = []

    async def force_limit(ctx: PreToolUseContext) -> HookResult:
        contexts.append(ctx.run)
        return HookResult.rewrite(args={**ctx.args, "limit": 10})

    async def truncate(ctx: PostToolUseContext) -> HookResult:
        return HookResult.rewrite(result=ToolResult(ctx.result.content[:5] + " [cut]"))

    hooks = HookRegistry()
    hooks.add_pre(force_limit)
    hooks.add_post(truncate, priority=10)
    hooks.add_post(_post_recorder(seen), priority=20)
    tools = registry(echo_tool("db__query", calls, reply="0123456789 rows"))
    fake_openai.script(tool_call("db__query", {"sql": "select"}), answer("ok"))
    run = RunContext(run_id="r1", requester="U1")
    await ReActAgent(make_llm(fake_openai), tools, hooks=hooks).run("q", context=run)
    assert calls == [{"sql": "select", "limit": 10}]
    assert fake_openai.requests[1]["messages"][-1]["content"] == "01234 [cut]"
    assert seen[0].outcome == "executed" and seen[0].args == {"sql": "select", "limit": 10}
    assert seen[0].result.content == "01234 [cut]"
    assert contexts == [run]  # RunContext passed through untouched


async def test_replay_skips_execution(fake_openai: FakeOpenAI) -> None:
    calls: list[dict[str, Any]] = []
    seen: list[PostToolUseContext] = []

    async def replay(ctx: PreToolUseContext) -> HookResult:
        return HookResult.replay(ToolResult("recorded result"))

    hooks = HookRegistry()
    hooks.add_pre(replay)
    hooks.add_post(_post_recorder(seen))
    fake_openai.script(tool_call("ops__restart", {}), answer("ok"))
    agent = ReActAgent(
        make_llm(fake_openai), registry(echo_tool("ops__restart", calls)), hooks=hooks
    )
    await agent.run("q")
    assert calls == []
    assert fake_openai.requests[1]["messages"][-1]["content"] == "recorded result"
    assert [c.outcome for c in seen] == ["replayed"]


async def test_hooks_apply_in_json_mode_too(fake_openai: FakeOpenAI) -> None:
    calls: list[dict[str, Any]] = []

    async def block(ctx: PreToolUseContext) -> HookResult:
        return HookResult.block("needs approval")

    hooks = HookRegistry()
    hooks.add_pre(block)
    fake_openai.script(json_action_call("ops__restart", {}), json_final("blocked"))
    llm = make_llm(fake_openai, abilities={"tool_call": False, "json_mode": True})
    await ReActAgent(llm, registry(echo_tool("ops__restart", calls)), hooks=hooks).run("q")
    assert calls == []
    assert (
        fake_openai.requests[1]["messages"][-1]["content"] == "Observation: Error: needs approval"
    )


async def test_tools_registered_during_a_run_reach_only_later_runs(fake_openai: FakeOpenAI) -> None:
    """An MCP server that comes up mid-run registers its tools in the shared registry: the run
    in progress keeps the tool list it started with, the next run sees the new tools."""
    tools = registry()

    async def bring_up(args: dict[str, Any]) -> ToolResult:
        tools.register(echo_tool("late__echo"))
        return ToolResult("up")

    tools.register(echo_tool("ops__wake", reply=bring_up))
    fake_openai.script(
        tool_call("ops__wake", {}),
        tool_call("late__echo", {}),  # the model guesses the new name: refused in this run
        answer("done"),
        answer("second run"),
    )
    agent = ReActAgent(make_llm(fake_openai), tools)
    first = await agent.run("wake it")
    offered = [[t["function"]["name"] for t in body["tools"]] for body in fake_openai.requests]
    assert offered[:3] == [["ops__wake"]] * 3
    assert "unknown tool 'late__echo'" in first.steps[1].observation
    await agent.run("again")
    assert [t["function"]["name"] for t in fake_openai.requests[-1]["tools"]] == [
        "ops__wake",
        "late__echo",
    ]
