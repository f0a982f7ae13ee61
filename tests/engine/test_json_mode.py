"""JSON mode: the fixed action protocol, prose tolerance, one reformat retry, interrupts."""

from __future__ import annotations

import json
from typing import Any

from bot.engine import prompts
from bot.engine.agent import ReActAgent
from bot.engine.interrupts import InterruptQueue
from bot.engine.tools import ToolResult
from tests.engine.helpers import Recorder, echo_tool, registry
from tests.fakes.fixtures import make_llm
from tests.fakes.openai_server import FakeOpenAI, Turn, answer, json_action_call, json_final

PLAIN: dict[str, bool] = {}


async def test_json_mode_when_model_lacks_tool_calling(fake_openai: FakeOpenAI) -> None:
    calls: list[dict[str, Any]] = []
    tools = registry(echo_tool("ops__status", calls, reply="green", description="Service status"))
    fake_openai.script(
        json_action_call("ops__status", {"id": "api"}, reasoning="look it up"),
        json_final("API is green"),
    )
    events = Recorder()
    agent = ReActAgent(make_llm(fake_openai, abilities={"json_mode": True}), tools)
    result = await agent.run("status?", emit=events)
    assert result.answer == "API is green"
    assert calls == [{"id": "api"}]
    first = fake_openai.requests[0]
    assert "tools" not in first
    assert first["response_format"] == {"type": "json_object"}
    system = first["messages"][0]["content"]
    assert "ops__status: Service status" in system and '"action": "tool_call"' in system
    assert fake_openai.requests[1]["messages"][-1] == {
        "role": "user",
        "content": "Observation: green",
    }
    assert events.of("thinking_done")[0].reasoning == "look it up"


async def test_use_native_tools_false_forces_json_mode(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(json_final("hi"))
    agent = ReActAgent(make_llm(fake_openai), registry(echo_tool("a__b")), use_native_tools=False)
    assert (await agent.run("q")).answer == "hi"
    assert "tools" not in fake_openai.requests[0]


async def test_prose_around_json_and_one_broken_reply(fake_openai: FakeOpenAI) -> None:
    calls: list[dict[str, Any]] = []
    action = json.dumps({"reasoning": "", "action": "tool_call", "tool_name": "ops__get",
                         "tool_args": {"id": "7"}})  # fmt: skip
    fake_openai.script(
        answer(f"Sure! Here is my action:\n```json\n{action}\n```\nHope that helps."),
        answer("I think the answer is probably 7, let me explain in prose"),
        json_final("It is 7."),
    )
    agent = ReActAgent(
        make_llm(fake_openai, abilities=PLAIN), registry(echo_tool("ops__get", calls))
    )
    result = await agent.run("q")
    assert calls == [{"id": "7"}]
    assert result.answer == "It is 7."
    third = fake_openai.requests[2]["messages"]
    assert third[-2]["content"].startswith("I think the answer")
    assert third[-1] == {"role": "user", "content": prompts.JSON_REFORMAT}
    assert "response_format" not in fake_openai.requests[0]


async def test_two_broken_replies_use_the_text_as_answer(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(answer("no json here"), answer("still plain words"))
    result = await ReActAgent(make_llm(fake_openai, abilities=PLAIN), registry()).run("q")
    assert result.stopped == "answer"
    assert result.answer == "still plain words"
    assert len(fake_openai.requests) == 2


async def test_reasoning_content_fills_empty_reasoning(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(Turn(content=json.dumps({"action": "final_answer", "answer": "x"}),
                            reasoning="deep thoughts"))  # fmt: skip
    events = Recorder()
    await ReActAgent(make_llm(fake_openai, abilities=PLAIN), registry()).run("q", emit=events)
    assert events.of("thinking_done")[0].reasoning == "deep thoughts"


async def test_json_interrupt_drained_right_after_the_assistant_message(
    fake_openai: FakeOpenAI,
) -> None:
    queue = InterruptQueue()

    async def slow(args: dict[str, Any]) -> ToolResult:
        return ToolResult("r")

    def reply(body: dict[str, Any]) -> Turn:
        if len(fake_openai.requests) == 1:
            queue.put("stop and summarise")
            return json_final("premature")
        return json_final("summary")

    fake_openai.respond_with(reply)
    agent = ReActAgent(
        make_llm(fake_openai, abilities=PLAIN), registry(echo_tool("a__b", reply=slow))
    )
    result = await agent.run("q", interrupts=queue)
    assert result.answer == "summary"
    sent = fake_openai.requests[1]["messages"]
    assert json.loads(sent[-2]["content"])["answer"] == "premature"
    assert (
        sent[-1]["content"].startswith("[USER INTERRUPT]")
        and "stop and summarise" in sent[-1]["content"]
    )
