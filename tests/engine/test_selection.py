"""Tool selection above the threshold: one cheap call, at most 6 tools, full set on failure."""

from __future__ import annotations

import json

from bot.engine.agent import ReActAgent
from bot.engine.agent_limits import EngineLimits
from tests.engine.helpers import Recorder, echo_tool, registry
from tests.fakes.fixtures import make_llm
from tests.fakes.openai_server import FakeOpenAI, answer, tool_call


def _tools(n: int):
    return registry(*(echo_tool(f"c{i}__act", description=f"Action number {i}") for i in range(n)))


async def test_thirteen_tools_trigger_one_selection_call(fake_openai: FakeOpenAI) -> None:
    picked = ["c3__act", "c5__act", "bogus__x", *(f"c{i}__act" for i in range(6, 12))]
    fake_openai.script(tool_call("select_tools", {"tools": picked}), answer("done"))
    events = Recorder()
    result = await ReActAgent(make_llm(fake_openai), _tools(13)).run("do 3 and 5", emit=events)
    assert result.answer == "done"
    selection, main = fake_openai.requests
    assert selection["tool_choice"]["function"]["name"] == "select_tools"
    catalogue = selection["messages"][0]["content"]
    assert "- c12__act: Action number 12" in catalogue and "do 3 and 5" in catalogue
    assert '"properties": {"id"' not in catalogue  # no parameter schemas in the catalogue
    names = [tool["function"]["name"] for tool in main["tools"]]
    picked_six = ["c3__act", "c5__act", "c6__act", "c7__act", "c8__act", "c9__act"]
    assert names == [*picked_six, "request_tools"]  # and the way out of a wrong pick
    assert [(e.phase, e.total_tools) for e in events.of("phase")] == [("selecting_tools", 13)]
    # the selection call's usage is part of the run's usage (FakeOpenAI: prompt = chars / 4)
    expected = sum(len(json.dumps(body["messages"])) // 4 for body in fake_openai.requests)
    assert result.usage.prompt_tokens == expected


async def test_twelve_tools_need_no_selection(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(answer("done"))
    await ReActAgent(make_llm(fake_openai), _tools(12)).run("q")
    assert len(fake_openai.requests) == 1 and len(fake_openai.requests[0]["tools"]) == 12


async def test_garbage_selection_falls_back_to_all_tools(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(*(answer("I like all of them!") for _ in range(5)), answer("done"))
    result = await ReActAgent(make_llm(fake_openai), _tools(13)).run("q")
    assert result.answer == "done"
    assert len(fake_openai.requests) == 6
    assert len(fake_openai.requests[5]["tools"]) == 13
    fake_openai.assert_complete()


async def test_only_invalid_names_fall_back_to_all_tools(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(tool_call("select_tools", {"tools": ["nope"]}), answer("done"))
    await ReActAgent(make_llm(fake_openai), _tools(13)).run("q")
    assert len(fake_openai.requests[1]["tools"]) == 13


async def test_selection_http_failure_falls_back(fake_openai: FakeOpenAI) -> None:
    fake_openai.fail_next(400)
    fake_openai.script(answer("done"))
    result = await ReActAgent(make_llm(fake_openai), _tools(13)).run("q")
    assert result.answer == "done" and len(fake_openai.requests[1]["tools"]) == 13


async def test_selection_limits_from_engine_limits(fake_openai: FakeOpenAI) -> None:
    limits = EngineLimits(tool_selection_threshold=3, tool_selection_max=2)
    picked = ["c0__act", "c1__act", "c2__act"]
    fake_openai.script(tool_call("select_tools", {"tools": picked}), answer("done"))
    await ReActAgent(make_llm(fake_openai), _tools(4), limits=limits).run("q")
    assert [t["function"]["name"] for t in fake_openai.requests[1]["tools"]] == [
        *picked[:2],
        "request_tools",
    ]
