"""The two-phase flow end to end: native tool loop over HTTP, then streamed synthesis."""

from __future__ import annotations

import dataclasses
import json
import logging
from typing import Any

import pytest

from bot.engine.agent import ReActAgent
from bot.engine.agent_limits import EngineLimits
from bot.engine.tools import ToolResult
from tests.engine.helpers import Recorder, echo_tool, registry
from tests.fakes.fixtures import make_llm
from tests.fakes.openai_server import FakeOpenAI, answer, tool_call, tool_calls


async def test_native_run_then_synthesis(fake_openai: FakeOpenAI) -> None:
    calls: list[dict[str, Any]] = []
    tools = registry(echo_tool("ops__status", calls, reply="api: healthy"))
    fake_openai.script(
        tool_call("ops__status", {"id": "api"}, id="call_a"),
        answer("The API is healthy."),
        answer("**api** is healthy."),
    )
    agent = ReActAgent(make_llm(fake_openai), tools)
    events = Recorder()
    result = await agent.run("is the api ok?", emit=events)
    assert result.stopped == "answer"
    assert result.answer == "The API is healthy."
    assert result.iterations == 2
    assert calls == [{"id": "api"}]
    assert [step.tool_name for step in result.steps] == ["ops__status"]
    assert result.usage.prompt_tokens > 0

    first, second = fake_openai.requests[0], fake_openai.requests[1]
    assert first["tools"][0]["function"]["name"] == "ops__status"
    assert first["tool_choice"] == "auto"
    assert first["messages"][-1] == {"role": "user", "content": "is the api ok?"}
    assert second["messages"][-2]["tool_calls"][0]["id"] == "call_a"
    assert second["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_a",
        "content": "api: healthy",
    }
    for body in fake_openai.requests:  # plain OpenAI dicts only
        for message in body["messages"]:
            assert set(message) <= {"role", "content", "tool_calls", "tool_call_id"}

    text = await agent.synthesize(result, emit=events)
    assert text == "**api** is healthy."
    synthesis = fake_openai.requests[2]
    assert synthesis["stream"] is True and "tools" not in synthesis
    assert "api: healthy" in synthesis["messages"][1]["content"]
    assert "is the api ok?" in synthesis["messages"][1]["content"]
    assert events.types()[:6] == [
        "thinking_start",
        "thinking_done",
        "iteration_start",
        "iteration_done",
        "thinking_start",
        "thinking_done",
    ]
    assert events.types()[6] == "answer_signal"
    assert events.types()[-2:] == ["answer_done", "done"]
    assert "".join(e.content for e in events.of("answer_delta")) == text
    fake_openai.assert_complete()


async def test_parallel_calls_run_concurrently_and_results_keep_order(
    fake_openai: FakeOpenAI,
) -> None:
    import asyncio

    both_started = asyncio.Event()
    started: list[str] = []

    def slow(tag: str):
        async def reply(args: dict[str, Any]) -> ToolResult:
            started.append(tag)
            if len(started) == 2:
                both_started.set()
            await asyncio.wait_for(both_started.wait(), 5)  # deadlocks unless run in parallel
            return ToolResult(f"result {tag}")

        return reply

    tools = registry(echo_tool("a__one", reply=slow("one")), echo_tool("a__two", reply=slow("two")))
    fake_openai.script(tool_calls(("a__one", {}), ("a__two", {})), answer("done"))
    result = await ReActAgent(make_llm(fake_openai), tools).run("both")
    assert result.answer == "done"
    sent = fake_openai.requests[1]["messages"]
    ids = [c["id"] for c in sent[-3]["tool_calls"]]
    assert [(m["role"], m["tool_call_id"], m["content"]) for m in sent[-2:]] == [
        ("tool", ids[0], "result one"),
        ("tool", ids[1], "result two"),
    ]


async def test_unknown_tool_and_tool_exception_become_error_observations(
    fake_openai: FakeOpenAI,
) -> None:
    async def boom(args: dict[str, Any]) -> ToolResult:
        raise RuntimeError("disk full")

    tools = registry(echo_tool("ops__broken", reply=boom))
    fake_openai.script(
        tool_call("ops__nope", {}), tool_call("ops__broken", {}), answer("gave up politely")
    )
    result = await ReActAgent(make_llm(fake_openai), tools, completion_check=False).run("x")
    assert result.answer == "gave up politely"
    unknown = fake_openai.requests[1]["messages"][-1]["content"]
    assert unknown.startswith("Error: unknown tool 'ops__nope'") and "ops__broken" in unknown
    failed = fake_openai.requests[2]["messages"][-1]["content"]
    assert "RuntimeError: disk full" in failed
    assert [bool(step.error) for step in result.steps] == [True, True]


async def test_llm_500_is_retried_inside_the_loop(fake_openai: FakeOpenAI) -> None:
    fake_openai.fail_next(500)
    fake_openai.script(answer("fine"))
    result = await ReActAgent(make_llm(fake_openai), registry()).run("hi")
    assert result.answer == "fine" and result.stopped == "answer"
    assert len(fake_openai.requests) == 2
    assert fake_openai.requests[0]["messages"] == fake_openai.requests[1]["messages"]


async def test_llm_down_ends_the_run_with_a_clear_message(fake_openai: FakeOpenAI) -> None:
    fake_openai.fail_next(503, count=4)
    agent = ReActAgent(make_llm(fake_openai), registry())
    result = await agent.run("hi")
    assert result.stopped == "error"
    assert "127.0.0.1" in result.answer and "(503)" in result.answer
    assert "sk-test" not in result.answer and result.failure is not None  # the run failed
    assert await agent.synthesize(result) == result.answer
    assert len(fake_openai.requests) == 4  # no synthesis attempt against a dead model


async def test_max_iterations_yields_fallback_summary(fake_openai: FakeOpenAI) -> None:
    tools = registry(echo_tool("ops__poll", reply="still pending"))
    fake_openai.respond_with(lambda body: tool_call("ops__poll", {"n": len(body["messages"])}))
    agent = ReActAgent(make_llm(fake_openai), tools, limits=EngineLimits(max_iterations=4))
    events = Recorder()
    result = await agent.run("wait for it", emit=events)
    assert result.stopped == "max_iterations"
    assert result.iterations == 4
    assert len(fake_openai.requests) == 4
    assert result.answer.startswith("I stopped after 4 iterations")
    assert result.answer.count("ops__poll(") == 4 and "still pending" in result.answer
    assert events.of("answer_signal") == []


async def test_history_goes_between_system_and_query(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(answer("yes"))
    history = [{"role": "user", "content": "earlier q"}, {"role": "assistant", "content": "a"}]
    await ReActAgent(make_llm(fake_openai), registry()).run("now?", history=history)
    sent = fake_openai.requests[0]["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"]
    assert sent[1:] == [*history, {"role": "user", "content": "now?"}]


async def test_failing_emitter_is_ignored(fake_openai: FakeOpenAI) -> None:
    def broken(event: object) -> None:
        raise ValueError("display broke")

    fake_openai.script(answer("still answered"), answer("streamed"))
    agent = ReActAgent(make_llm(fake_openai), registry())
    result = await agent.run("q", emit=broken)
    assert result.answer == "still answered"
    assert await agent.synthesize(result, emit=broken) == "streamed"


@pytest.mark.parametrize("bad", ["{not json", "[1, 2]"])
async def test_bad_native_arguments_are_an_error_observation(
    fake_openai: FakeOpenAI, bad: str
) -> None:
    from tests.fakes.openai_server import Turn

    raw = {"id": "c1", "type": "function", "function": {"name": "ops__x", "arguments": bad}}
    fake_openai.script(Turn(tool_calls=(raw,)), answer("ok"))
    calls: list[dict[str, Any]] = []
    await ReActAgent(make_llm(fake_openai), registry(echo_tool("ops__x", calls))).run("q")
    assert calls == []
    assert "not a JSON object" in fake_openai.requests[1]["messages"][-1]["content"]
    assert json.loads(json.dumps(fake_openai.requests[1]))  # still valid wire JSON


async def test_async_emitter_is_awaited(fake_openai: FakeOpenAI) -> None:
    seen: list[str] = []

    async def emit(event: object) -> None:
        seen.append(event.type)  # type: ignore[attr-defined]

    fake_openai.script(tool_call("a__b", {}), answer("x"), answer("streamed"))
    agent = ReActAgent(make_llm(fake_openai), registry(echo_tool("a__b")))
    await agent.synthesize(await agent.run("q", emit=emit), emit=emit)
    assert seen[:4] == ["thinking_start", "thinking_done", "iteration_start", "iteration_done"]
    assert seen[-3:] == ["answer_delta", "answer_done", "done"]


async def test_a_raising_tool_leaks_no_secret_into_observation_or_logs(
    fake_openai: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    secret = "sk-live-0123456789"

    async def leaky(args: dict[str, Any]) -> ToolResult:
        raise RuntimeError(f"upstream refused token {secret}")

    tool = dataclasses.replace(echo_tool("ops__leaky", reply=leaky), secret_values=lambda: [secret])
    fake_openai.script(tool_call("ops__leaky", {}), answer("failed"))
    caplog.set_level(logging.DEBUG)
    await ReActAgent(make_llm(fake_openai), registry(tool)).run("q")
    observation = fake_openai.requests[1]["messages"][-1]["content"]
    assert "RuntimeError: upstream refused token [REDACTED]" in observation
    assert secret not in caplog.text
    assert "upstream refused token [REDACTED]" in caplog.text  # the traceback is still there
