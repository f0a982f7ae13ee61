"""stream_answer / synthesize: the trace cut per result, events, fallback to the loop's text."""

from __future__ import annotations

from bot.engine.agent import ReActAgent
from bot.engine.agent_limits import EngineLimits
from tests.engine.helpers import Recorder, echo_tool, registry
from tests.fakes.fixtures import make_llm
from tests.fakes.openai_server import FakeOpenAI, answer, broken_stream, tool_call


async def test_tool_results_are_cut_to_the_limit_in_the_synthesis_prompt(
    fake_openai: FakeOpenAI,
) -> None:
    long = "A" * 1990 + "B" * 20 + "C" * 3000
    tools = registry(echo_tool("logs__tail", reply=long))
    fake_openai.script(tool_call("logs__tail", {"n": 1}), answer("draft"), answer("final"))
    agent = ReActAgent(make_llm(fake_openai), tools)
    result = await agent.run("show logs")
    chunks = [delta async for delta in agent.stream_answer(result)]
    assert "".join(chunks) == "final"
    prompt = fake_openai.requests[2]["messages"][1]["content"]
    assert "A" * 1990 + "B" * 10 + " [...truncated]" in prompt
    assert "C" not in prompt.replace("Question", "")
    assert "logs__tail" in prompt and "draft" in prompt and "show logs" in prompt
    system = fake_openai.requests[2]["messages"][0]["content"]
    assert "language of the user's question" in system


async def test_truncation_limit_comes_from_engine_limits(fake_openai: FakeOpenAI) -> None:
    tools = registry(echo_tool("logs__tail", reply="x" * 50))
    fake_openai.script(tool_call("logs__tail", {}), answer("draft"), answer("final"))
    agent = ReActAgent(
        make_llm(fake_openai), tools, limits=EngineLimits(synthesis_truncate_chars=10)
    )
    await agent.synthesize(await agent.run("q"))
    prompt = fake_openai.requests[2]["messages"][1]["content"]
    assert "x" * 10 + " [...truncated]" in prompt and "x" * 11 not in prompt


async def test_stream_failure_falls_back_to_the_loops_text(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(answer("the loop's answer"), broken_stream("partial synthesis text"))
    agent = ReActAgent(make_llm(fake_openai), registry())
    result = await agent.run("q")
    events = Recorder()
    text = await agent.synthesize(result, emit=events)
    assert text == "the loop's answer"
    assert len(fake_openai.streamed_requests()) == 1
    assert events.types() == ["answer_start", "answer_delta", "answer_reset", "answer_done", "done"]
    assert events.of("answer_delta")[0].content == "partial "  # shown, then void:
    assert events.of("answer_reset")[0].content == "the loop's answer"  # replaced, not appended
    assert events.of("done")[0].answer == "the loop's answer"


async def test_a_stream_that_fails_before_any_delta_needs_no_reset(
    fake_openai: FakeOpenAI,
) -> None:
    fake_openai.script(answer("loop text"), broken_stream("never shown", after=0))
    agent = ReActAgent(make_llm(fake_openai), registry())
    events = Recorder()
    assert await agent.synthesize(await agent.run("q"), emit=events) == "loop text"
    assert events.types() == ["answer_start", "answer_delta", "answer_done", "done"]
    assert events.of("answer_delta")[0].content == "loop text"


async def test_stream_http_failure_falls_back(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(answer("loop text"))
    agent = ReActAgent(make_llm(fake_openai, max_retries=1), registry())
    result = await agent.run("q")
    fake_openai.fail_next(500, count=2)
    assert await agent.synthesize(result) == "loop text"
    assert len(fake_openai.requests) == 3  # the stream was retried before giving up


async def test_synthesize_streams_deltas_and_done(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(answer("x"), answer("A streamed answer in several chunks."))
    agent = ReActAgent(make_llm(fake_openai), registry())
    result = await agent.run("q")
    events = Recorder()
    text = await agent.synthesize(result, emit=events)
    assert text == "A streamed answer in several chunks."
    deltas = events.of("answer_delta")
    assert len(deltas) > 1 and "".join(d.content for d in deltas) == text
    done = events.of("done")[0]
    assert (done.answer, done.iterations) == (text, 1)
