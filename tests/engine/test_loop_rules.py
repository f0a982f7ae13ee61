"""Loop rules of DESIGN §2, each checked on what the model received and on the result/events."""

from __future__ import annotations

from typing import Any

import pytest

from bot.config import Settings
from bot.engine import prompts
from bot.engine.agent import ReActAgent
from bot.engine.agent_limits import EngineLimits
from bot.engine.interrupts import InterruptQueue
from bot.engine.tools import ToolResult
from tests.engine.helpers import Recorder, contents, echo_tool, registry
from tests.fakes.fixtures import make_llm
from tests.fakes.openai_server import FakeOpenAI, Turn, answer, tool_call, tool_calls

CYCLE_MARK = "with identical arguments"
REFLECTION_MARK = "[SELF-REFLECTION]"
CHECKLIST_MARK = "[COMPLETION CHECK]"


def _count(body: dict[str, Any], mark: str) -> int:
    return sum(mark in text for text in contents(body["messages"]))


async def test_third_identical_call_injects_cycle_warning(fake_openai: FakeOpenAI) -> None:
    tools = registry(echo_tool("ops__get", reply="same"))
    fake_openai.script(
        *(tool_call("ops__get", {"id": "x"}) for _ in range(3)),
        tool_call("ops__get", {"id": "y"}),
        answer("done"),
    )
    agent = ReActAgent(make_llm(fake_openai), tools, completion_check=False)
    result = await agent.run("q")
    assert result.answer == "done"
    requests = fake_openai.requests
    assert [_count(body, CYCLE_MARK) for body in requests] == [0, 0, 0, 1, 1]
    warning = requests[3]["messages"][-1]
    assert warning["role"] == "user"
    assert warning["content"] == (
        "You have called `ops__get` with identical arguments 3 times and received the same "
        "result. Please try a different approach or tool."
    )
    assert requests[3]["messages"][-2]["role"] == "tool"  # after the tool result, not between


async def test_cycle_counts_reset_per_run(fake_openai: FakeOpenAI) -> None:
    tools = registry(echo_tool("ops__get"))
    agent = ReActAgent(make_llm(fake_openai), tools, completion_check=False)
    for _ in range(2):
        fake_openai.script(*(tool_call("ops__get", {"id": "x"}) for _ in range(2)), answer("ok"))
        await agent.run("q")
    assert all(_count(body, CYCLE_MARK) == 0 for body in fake_openai.requests)


async def test_six_tool_calls_inject_one_reflection(fake_openai: FakeOpenAI) -> None:
    tools = registry(echo_tool("ops__get"))
    fake_openai.script(
        *(tool_call("ops__get", {"id": str(n)}) for n in range(7)),
        answer("done"),
    )
    agent = ReActAgent(make_llm(fake_openai), tools, completion_check=False)
    await agent.run("find the culprit")
    counts = [_count(body, REFLECTION_MARK) for body in fake_openai.requests]
    assert counts == [0, 0, 0, 0, 0, 0, 1, 1]
    reflection = fake_openai.requests[6]["messages"][-1]["content"]
    assert "6 tool calls" in reflection and "find the culprit" in reflection


async def test_reflection_after_all_parallel_results(fake_openai: FakeOpenAI) -> None:
    tools = registry(echo_tool("ops__get"))
    fake_openai.script(
        tool_calls(*(("ops__get", {"id": str(n)}) for n in range(6))), answer("done")
    )
    await ReActAgent(make_llm(fake_openai), tools, completion_check=False).run("q")
    sent = fake_openai.requests[1]["messages"]
    assert [m["role"] for m in sent[-8:]] == ["assistant"] + ["tool"] * 6 + ["user"]
    assert sent[-1]["content"].startswith(REFLECTION_MARK)


async def test_parse_retries_do_not_count_towards_reflection(fake_openai: FakeOpenAI) -> None:
    from tests.fakes.openai_server import json_action_call, json_final

    tools = registry(echo_tool("ops__get"))
    turns: list[Turn] = []
    for n in range(5):
        turns += [answer("not json at all"), json_action_call("ops__get", {"id": str(n)})]
    fake_openai.script(*turns, json_final("done"))
    llm = make_llm(fake_openai, abilities={})
    await ReActAgent(llm, tools, completion_check=False).run("q")
    assert all(_count(body, REFLECTION_MARK) == 0 for body in fake_openai.requests)


async def test_checklist_fires_once_and_its_turn_never_reaches_the_user(
    fake_openai: FakeOpenAI,
) -> None:
    tools = registry(echo_tool("ops__get", reply="value 42"))
    fake_openai.script(
        *(tool_call("ops__get", {"id": str(n)}) for n in range(3)),
        answer("draft: 42"),
        answer("Verification: 1. yes 2. yes 3. none"),
        answer("The value is 42."),
        answer("**42**"),
    )
    agent = ReActAgent(make_llm(fake_openai), tools)
    events = Recorder()
    result = await agent.run("what is the value?", emit=events)
    assert result.answer == "The value is 42."
    assert result.iterations == 6
    requests = fake_openai.requests
    assert [_count(body, CHECKLIST_MARK) for body in requests[:6]] == [0, 0, 0, 0, 1, 1]
    assert requests[4]["messages"][-1]["content"].startswith(CHECKLIST_MARK)
    assert requests[5]["messages"][-2]["content"].startswith("Verification:")
    assert requests[5]["messages"][-1]["content"] == prompts.CHECKLIST_DONE
    assert len(events.of("answer_signal")) == 1
    text = await agent.synthesize(result)
    assert text == "**42**"
    synthesis = requests[6]["messages"][1]["content"]
    assert "Verification" not in synthesis and CHECKLIST_MARK not in synthesis


async def test_checklist_reply_that_calls_tools_resumes_the_loop(fake_openai: FakeOpenAI) -> None:
    tools = registry(echo_tool("ops__get"))
    fake_openai.script(
        *(tool_call("ops__get", {"id": str(n)}) for n in range(3)),
        answer("draft"),
        tool_call("ops__get", {"id": "missing"}),
        answer("complete answer"),
    )
    result = await ReActAgent(make_llm(fake_openai), tools).run("q")
    assert result.answer == "complete answer"
    assert sum(_count(body, CHECKLIST_MARK) > 0 for body in fake_openai.requests) == 2
    assert all(prompts.CHECKLIST_DONE not in contents(b["messages"]) for b in fake_openai.requests)
    fake_openai.assert_complete()


async def test_checklist_not_below_min_tools_nor_without_budget(fake_openai: FakeOpenAI) -> None:
    tools = registry(echo_tool("ops__get"))
    fake_openai.script(*(tool_call("ops__get", {"id": str(n)}) for n in range(2)), answer("a"))
    result = await ReActAgent(make_llm(fake_openai), tools).run("q")
    assert result.answer == "a" and result.iterations == 3
    # 3 tools, but the answer comes at iteration 4 of 5: no room for check + answer
    fake_openai.script(*(tool_call("ops__get", {"id": str(n)}) for n in range(3)), answer("b"))
    limits = EngineLimits(max_iterations=5)
    result = await ReActAgent(make_llm(fake_openai), tools, limits=limits).run("q")
    assert result.answer == "b"
    assert all(_count(body, CHECKLIST_MARK) == 0 for body in fake_openai.requests)


async def test_interrupt_during_native_tools_lands_after_all_results(
    fake_openai: FakeOpenAI,
) -> None:
    queue = InterruptQueue()

    async def interrupting(args: dict[str, Any]) -> ToolResult:
        queue.put(f"also check {args['id']}")
        return ToolResult(f"checked {args['id']}")

    tools = registry(echo_tool("ops__check", reply=interrupting))
    fake_openai.script(
        tool_calls(("ops__check", {"id": "db"}), ("ops__check", {"id": "cache"})),
        answer("both fine"),
    )
    events = Recorder()
    agent = ReActAgent(make_llm(fake_openai), tools)
    result = await agent.run("check", interrupts=queue, emit=events)
    assert result.answer == "both fine"
    sent = fake_openai.requests[1]["messages"]
    assert [m["role"] for m in sent[-4:]] == ["assistant", "tool", "tool", "user"]
    interrupt = sent[-1]["content"]
    assert interrupt.startswith("[USER INTERRUPT]")
    assert "also check db" in interrupt and "also check cache" in interrupt
    assert sum("[USER INTERRUPT]" in text for text in contents(sent)) == 1
    assert [e.content for e in events.of("inject")] == [interrupt]


async def test_interrupt_suppresses_a_pending_final_answer(fake_openai: FakeOpenAI) -> None:
    queue = InterruptQueue()

    def reply(body: dict[str, Any]) -> Turn:
        if len(fake_openai.requests) == 1:
            queue.put("actually, in French please")  # arrives while the model answers
            return answer("The answer.")
        return answer("La réponse.")

    fake_openai.respond_with(reply)
    events = Recorder()
    result = await ReActAgent(make_llm(fake_openai), registry()).run(
        "q", interrupts=queue, emit=events
    )
    assert result.answer == "La réponse."
    sent = fake_openai.requests[1]["messages"]
    assert sent[-2] == {"role": "assistant", "content": "The answer."}
    assert sent[-1]["content"].startswith("[USER INTERRUPT]")
    assert len(events.of("answer_signal")) == 1


async def test_react_env_thresholds_reach_the_agent(
    fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REACT_MAX_ITERATIONS", "3")
    monkeypatch.setenv("REACT_CYCLE_DETECTION_THRESHOLD", "2")
    monkeypatch.setenv("REACT_COMPLETION_CHECK_MIN_TOOLS", "1")
    monkeypatch.setenv("REACT_SELF_REFLECTION_INTERVAL", "2")
    limits = Settings().engine_limits
    tools = registry(echo_tool("ops__get"))
    fake_openai.respond_with(lambda body: tool_call("ops__get", {"id": "same"}))
    result = await ReActAgent(make_llm(fake_openai), tools, limits=limits).run("q")
    assert result.stopped == "max_iterations" and result.iterations == 3
    second = fake_openai.requests[2]["messages"]
    assert any(CYCLE_MARK in text and "2 times" in text for text in contents(second))
    assert any(text.startswith(REFLECTION_MARK) for text in contents(second))


async def test_react_completion_check_min_tools_from_env(
    fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REACT_COMPLETION_CHECK_MIN_TOOLS", "1")
    tools = registry(echo_tool("ops__get"))
    fake_openai.script(tool_call("ops__get", {}), answer("d"), answer("verified"), answer("f"))
    agent = ReActAgent(make_llm(fake_openai), tools, limits=Settings().engine_limits)
    assert (await agent.run("q")).answer == "f"
    assert _count(fake_openai.requests[2], CHECKLIST_MARK) == 1


async def test_checklist_never_fires_for_a_reply_without_tools(fake_openai: FakeOpenAI) -> None:
    """Even with the minimum at 0, a conversational answer (no tool used) is taken as it is."""
    fake_openai.script(answer("Hello!"))
    limits = EngineLimits(completion_check_min_tools=0)
    result = await ReActAgent(make_llm(fake_openai), registry(echo_tool("ops__get")),
                              limits=limits).run("hi")  # fmt: skip
    assert result.answer == "Hello!" and result.iterations == 1
    fake_openai.assert_complete()


def test_every_react_variable_reaches_its_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    values = {
        "REACT_MAX_ITERATIONS": 11, "REACT_TOOL_SELECTION_THRESHOLD": 12,
        "REACT_TOOL_SELECTION_MAX": 13, "REACT_SELF_REFLECTION_INTERVAL": 14,
        "REACT_CYCLE_DETECTION_THRESHOLD": 15, "REACT_COMPLETION_CHECK_MIN_TOOLS": 16,
        "REACT_SYNTHESIS_TRUNCATE_CHARS": 17, "REACT_CONTEXT_BUDGET_TOKENS": 18,
    }  # fmt: skip
    for name, value in values.items():
        monkeypatch.setenv(name, str(value))
    assert Settings().engine_limits == EngineLimits(
        max_iterations=11, tool_selection_threshold=12, tool_selection_max=13,
        self_reflection_interval=14, cycle_detection_threshold=15,
        completion_check_min_tools=16, synthesis_truncate_chars=17, context_budget_tokens=18,
    )  # fmt: skip
