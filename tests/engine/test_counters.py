"""Reflection and the completion checklist count calls that ran, never refused attempts.

A blocked call (a PreToolUse hook, the argument check), a call to a tool that does not exist and
a call whose arguments are not an object never reach the tool: they must not bring the
reflection or the checklist closer (DESIGN §2 "every 6 real tool calls").
"""

from __future__ import annotations

from typing import Any

from bot.engine.agent import ReActAgent
from bot.engine.hooks import HookRegistry, HookResult, PreToolUseContext
from tests.engine.helpers import contents, echo_tool, registry
from tests.fakes.fixtures import make_llm
from tests.fakes.openai_server import FakeOpenAI, Turn, answer, tool_call

REFLECTION_MARK = "[SELF-REFLECTION]"
CHECKLIST_MARK = "[COMPLETION CHECK]"


def _marks(fake: FakeOpenAI, mark: str) -> list[int]:
    return [sum(mark in text for text in contents(body["messages"])) for body in fake.requests]


def _blocking_hooks() -> HookRegistry:
    async def refuse_writes(ctx: PreToolUseContext) -> HookResult:
        return HookResult.block("read-only mode")

    hooks = HookRegistry()
    hooks.add_pre(refuse_writes, name="read_only", tools="ops__write")
    return hooks


def _refused_attempts() -> list[Turn]:
    """Seven attempts that never run: blocked, unknown tool, arguments not an object."""
    return [
        *(tool_call("ops__write", {"id": str(n)}) for n in range(3)),
        tool_call("ops__nope", {}),
        tool_call("ops__gone", {"id": "1"}),
        Turn(tool_calls=({"id": "c1", "type": "function",
                          "function": {"name": "ops__get", "arguments": "[1, 2]"}},)),
        tool_call("ops__get", {"id": 7}),  # the schema wants a string: the argument check
    ]  # fmt: skip


async def test_refused_attempts_never_bring_a_reflection(fake_openai: FakeOpenAI) -> None:
    runs: list[dict[str, Any]] = []
    tools = registry(echo_tool("ops__get", runs), echo_tool("ops__write", runs))
    fake_openai.script(*_refused_attempts(), answer("nothing ran"))
    agent = ReActAgent(
        make_llm(fake_openai), tools, hooks=_blocking_hooks(), completion_check=False
    )
    result = await agent.run("look around")
    assert runs == [] and len(result.steps) == 7
    assert _marks(fake_openai, REFLECTION_MARK) == [0] * 8


async def test_only_calls_that_ran_reach_the_reflection(fake_openai: FakeOpenAI) -> None:
    """Seven refused attempts and six real calls, interleaved: the reflection comes exactly
    after the sixth real call and says six."""
    runs: list[dict[str, Any]] = []
    tools = registry(echo_tool("ops__get", runs), echo_tool("ops__write", runs))
    refused = _refused_attempts()
    turns: list[Turn] = []
    for n in range(6):
        turns.append(tool_call("ops__get", {"id": f"real{n}"}))
        if refused:
            turns.append(refused.pop(0))
    turns += [*refused, answer("done")]
    fake_openai.script(*turns)
    agent = ReActAgent(
        make_llm(fake_openai), tools, hooks=_blocking_hooks(), completion_check=False
    )
    await agent.run("find the culprit")
    assert len(runs) == 6
    marks = _marks(fake_openai, REFLECTION_MARK)
    first = marks.index(1)
    last_real = max(i for i, turn in enumerate(turns) if turn.tool_calls and
                    turn.tool_calls[0]["function"]["arguments"] == '{"id": "real5"}')  # fmt: skip
    assert first == last_real + 1 and max(marks) == 1
    assert "6 tool calls" in fake_openai.requests[first]["messages"][-1]["content"]


async def test_refused_attempts_do_not_trigger_the_checklist(fake_openai: FakeOpenAI) -> None:
    tools = registry(echo_tool("ops__get"), echo_tool("ops__write"))
    fake_openai.script(*_refused_attempts(), tool_call("ops__get", {"id": "1"}), answer("a"))
    agent = ReActAgent(make_llm(fake_openai), tools, hooks=_blocking_hooks())
    result = await agent.run("q")
    assert result.answer == "a"  # 8 attempts, 1 ran: below the 3 the checklist needs
    assert _marks(fake_openai, CHECKLIST_MARK) == [0] * 9
    fake_openai.assert_complete()


async def test_three_calls_that_ran_still_trigger_the_checklist(fake_openai: FakeOpenAI) -> None:
    tools = registry(echo_tool("ops__get"), echo_tool("ops__write"))
    fake_openai.script(
        tool_call("ops__write", {"id": "0"}),
        *(tool_call("ops__get", {"id": str(n)}) for n in range(3)),
        answer("draft"),
        answer("verified"),
        answer("final"),
    )
    agent = ReActAgent(make_llm(fake_openai), tools, hooks=_blocking_hooks())
    result = await agent.run("q")
    assert result.answer == "final"
    assert fake_openai.requests[5]["messages"][-1]["content"].startswith(CHECKLIST_MARK)
