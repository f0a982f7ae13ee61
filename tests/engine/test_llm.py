"""OpenAICompatibleLLM through the real openai SDK against FakeOpenAI."""

from __future__ import annotations

import dataclasses

import openai
import pytest

from bot.config import Settings
from bot.engine.llm import LLMError, OpenAICompatibleLLM
from bot.engine.llm_replies import delta_text
from bot.engine.retry import hinted_delay
from bot.model_http import model_http_client
from bot.observability.metrics import Metrics
from tests.fakes.fixtures import make_llm
from tests.fakes.openai_server import (
    FakeOpenAI,
    answer,
    broken_stream,
    failed_stream,
    tool_call,
)


async def test_chat_parses_content_reasoning_and_usage(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(answer("hello", reasoning="thought about it"))
    llm = make_llm(fake_openai)
    reply = await llm.chat([{"role": "user", "content": "hi"}])
    assert reply.content == "hello"
    assert reply.reasoning_content == "thought about it"
    assert reply.usage.prompt_tokens > 0 and reply.usage.completion_tokens > 0
    assert fake_openai.requests[0]["model"] == "fake-model"
    assert fake_openai.requests[0]["messages"] == [{"role": "user", "content": "hi"}]
    fake_openai.assert_complete()


async def test_chat_sends_tools_and_parses_tool_calls(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(tool_call("ops__status", {"id": "api"}, id="call_1"))
    llm = make_llm(fake_openai)
    schema = {"type": "function", "function": {"name": "ops__status", "parameters": {}}}
    reply = await llm.chat(
        [{"role": "user", "content": "status?"}],
        tools=[schema],
        tool_choice="auto",
        response_format={"type": "json_object"},
    )
    assert [(c.id, c.name, c.arguments) for c in reply.tool_calls] == [
        ("call_1", "ops__status", '{"id": "api"}')
    ]
    sent = fake_openai.requests[0]
    assert sent["tools"] == [schema]
    assert sent["tool_choice"] == "auto"
    assert sent["response_format"] == {"type": "json_object"}


async def test_500_is_retried_then_succeeds(fake_openai: FakeOpenAI) -> None:
    fake_openai.fail_next(500, count=2)
    fake_openai.script(answer("ok"))
    reply = await make_llm(fake_openai).chat([{"role": "user", "content": "x"}])
    assert reply.content == "ok"
    assert len(fake_openai.requests) == 3
    fake_openai.assert_complete()


async def test_429_honours_retry_after(fake_openai: FakeOpenAI) -> None:
    fake_openai.fail_next(429, headers={"Retry-After": "0"})
    fake_openai.script(answer("ok"))
    reply = await make_llm(fake_openai).chat([{"role": "user", "content": "x"}])
    assert reply.content == "ok"
    assert len(fake_openai.requests) == 2


async def test_persistent_failure_raises_clear_llm_error(fake_openai: FakeOpenAI) -> None:
    fake_openai.fail_next(503, count=3)
    llm = make_llm(fake_openai, max_retries=2)
    with pytest.raises(LLMError) as info:
        await llm.chat([{"role": "user", "content": "x"}])
    assert "HTTP 503" in str(info.value) and "3 attempts" in str(info.value)
    assert "sk-test" not in str(info.value)
    assert len(fake_openai.requests) == 3


async def test_400_is_not_retried(fake_openai: FakeOpenAI) -> None:
    fake_openai.fail_next(400)
    with pytest.raises(LLMError, match="HTTP 400"):
        await make_llm(fake_openai).chat([{"role": "user", "content": "x"}])
    assert len(fake_openai.requests) == 1


async def test_connection_error_is_retried_then_reported(fake_openai: FakeOpenAI) -> None:
    llm = make_llm(fake_openai, max_retries=1)
    await fake_openai.stop()
    with pytest.raises(LLMError, match="could not be reached"):
        await llm.chat([{"role": "user", "content": "x"}])


async def test_stream_chat_yields_deltas(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(answer("The service is healthy and serving traffic."))
    llm = make_llm(fake_openai)
    pieces = [piece async for piece in llm.stream_chat([{"role": "user", "content": "x"}])]
    assert len(pieces) > 1
    assert "".join(pieces) == "The service is healthy and serving traffic."
    assert fake_openai.requests[0]["stream"] is True


async def deltas_until_it_fails(llm: OpenAICompatibleLLM, match: str) -> list[str]:
    """The deltas a stream gave before it failed with an `LLMError` matching `match`."""
    got: list[str] = []
    with pytest.raises(LLMError, match=match):
        async for piece in llm.stream_chat([{"role": "user", "content": "x"}]):
            got.append(piece)
    return got


async def test_stream_retries_before_first_delta_and_fails_clearly_after(
    fake_openai: FakeOpenAI,
) -> None:
    fake_openai.fail_next(500)
    fake_openai.script(broken_stream("a long answer that will break", after=1))
    got = await deltas_until_it_fails(make_llm(fake_openai), "stream")
    assert got == ["a long a"]
    assert len(fake_openai.requests) == 2


async def test_an_error_inside_the_stream_ends_it_with_a_clear_error(
    fake_openai: FakeOpenAI,
) -> None:
    """A server whose generation fails midway says so in the stream (an SSE error event, with
    a 200 already sent): the deltas before it arrive, then the stream fails as broken."""
    fake_openai.script(failed_stream("a long answer that fails", after=2))
    got = await deltas_until_it_fails(make_llm(fake_openai), "stream .*broke: .*generation failed")
    assert got == ["a long a", "nswer th"]


@pytest.mark.parametrize(
    "chunk",
    [
        None,
        "text",
        [],
        {},
        {"choices": None},
        {"choices": []},
        {"choices": ["x"]},
        {"choices": [{"delta": None}]},
        {"choices": [{"delta": {"role": "assistant"}}]},
        {"choices": [{"delta": {"content": 7}}]},
        {"choices": [], "usage": {"prompt_tokens": 3}},
    ],
)
def test_a_chunk_without_text_gives_none(chunk: object) -> None:
    """Whatever a server streams that is not a content delta is passed over, never a crash."""
    assert delta_text(chunk) is None


def test_a_content_delta_gives_its_text() -> None:
    assert delta_text({"choices": [{"index": 0, "delta": {"content": "ok"}}]}) == "ok"


async def test_from_settings_uses_model_abilities_and_placeholder_key(
    fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.base_url)
    monkeypatch.setenv("CHATOPS_MODEL", "local-llama")
    monkeypatch.setenv("CHATOPS_LLM_ABILITIES", "json_mode")
    llm = OpenAICompatibleLLM.from_settings(Settings())
    assert llm.abilities == {"tool_call": False, "json_mode": True, "vision": False}
    fake_openai.script(answer("ok"))
    assert (await llm.chat([{"role": "user", "content": "x"}])).content == "ok"
    assert fake_openai.requests[0]["model"] == "local-llama"
    assert fake_openai.headers[0]["Authorization"] == "Bearer not-needed"


async def test_unconfigured_llm_raises_clear_error() -> None:
    llm = OpenAICompatibleLLM.from_settings(Settings())
    with pytest.raises(LLMError, match="OPENAI_API_KEY or OPENAI_BASE_URL"):
        await llm.chat([{"role": "user", "content": "x"}])


async def test_retry_delay_follows_retry_after(fake_openai: FakeOpenAI) -> None:
    fake_openai.fail_next(429, headers={"Retry-After": "7"})
    llm = OpenAICompatibleLLM(
        model="m", base_url=fake_openai.base_url, max_retries=0, backoff_max_s=30
    )
    with pytest.raises(LLMError, match="HTTP 429") as info:
        await llm.chat([{"role": "user", "content": "x"}])
    cause = info.value.__cause__
    assert isinstance(cause, Exception)
    assert isinstance(cause, openai.APIStatusError)
    hinted = hinted_delay(cause.response.headers)
    assert llm.retry_policy.delay(0, hinted) == 7.0
    capped = OpenAICompatibleLLM(model="m", base_url="x", backoff_max_s=2).retry_policy
    assert capped.delay(0, hinted) == 2.0


def test_retry_after_forms() -> None:
    assert hinted_delay({"retry-after": "3"}) == 3.0
    assert hinted_delay({"Retry-After-Ms": "250"}) == 0.25
    assert hinted_delay({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0
    assert hinted_delay({"retry-after": "soon"}) is None
    assert hinted_delay({}) is None


async def test_timeout_is_retried_then_reported(fake_openai: FakeOpenAI) -> None:
    llm = OpenAICompatibleLLM(
        model="m",
        base_url=fake_openai.base_url,
        timeout_s=0.2,
        max_retries=1,
        backoff_base_s=0.01,
        http_client=model_http_client(),
    )
    fake_openai.hold()
    try:
        with pytest.raises(LLMError, match="timed out"):
            await llm.chat([{"role": "user", "content": "x"}])
    finally:
        fake_openai.release()
    assert len(fake_openai.requests) == 2


async def test_reasoning_field_and_object_arguments_from_local_servers(
    fake_openai: FakeOpenAI,
) -> None:
    from tests.fakes.openai_server import Turn

    raw = {"type": "function", "function": {"name": "a__b", "arguments": {"k": 1}}}
    fake_openai.script(Turn(tool_calls=(raw,)))
    reply = await make_llm(fake_openai).chat([{"role": "user", "content": "x"}])
    assert reply.tool_calls[0].arguments == '{"k": 1}'
    assert reply.tool_calls[0].id == ""  # no id sent: the engine gives the call a unique one


async def test_each_attempt_its_failure_and_the_tokens_are_metered(fake_openai: FakeOpenAI) -> None:
    metrics = Metrics()
    llm = OpenAICompatibleLLM(
        model="fake-model", base_url=fake_openai.base_url, api_key="sk-test-not-a-secret",
        max_retries=1, backoff_base_s=0.01, meter=metrics,
    )  # fmt: skip
    fake_openai.fail_next(429, headers={"Retry-After": "0"})
    fake_openai.script(dataclasses.replace(answer("ok"), prompt_tokens=11, completion_tokens=3))
    # the compaction model's copy counts on the same meter
    await llm.with_model("fake-compact").chat([{"role": "user", "content": "x"}])
    value = metrics.registry.get_sample_value
    assert value("chatops_model_errors_total", {"kind": "rate_limited"}) == 1
    assert value("chatops_model_request_duration_seconds_count", {"call": "chat"}) == 2
    assert value("chatops_model_tokens_total", {"kind": "prompt"}) == 11
    assert value("chatops_model_tokens_total", {"kind": "completion"}) == 3

    with pytest.raises(LLMError):
        await OpenAICompatibleLLM(model="m", meter=metrics).chat([{"role": "user", "content": "x"}])
    assert value("chatops_model_errors_total", {"kind": "not_configured"}) == 1
    assert value("chatops_model_request_duration_seconds_count", {"call": "chat"}) == 2  # none sent
