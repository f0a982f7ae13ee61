"""structured_llm_call's three levels and call counts, and extract_json, over HTTP."""

from __future__ import annotations

import json
import re

import pytest

from bot.engine.structured import StructuredOutputError, extract_json, structured_llm_call
from tests.fakes.fixtures import make_llm
from tests.fakes.openai_server import FakeOpenAI, answer, tool_call

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
MESSAGES = [{"role": "user", "content": "give n"}]
BOTH = {"tool_call": True, "json_mode": True}


@pytest.mark.parametrize(
    ("abilities", "calls", "levels"),
    [
        (BOTH, 5, ["native", "json", "json", "plain", "plain"]),
        ({"json_mode": True}, 4, ["json", "json", "plain", "plain"]),
        ({}, 2, ["plain", "plain"]),
    ],
)
async def test_worst_case_call_counts(
    fake_openai: FakeOpenAI, abilities: dict[str, bool], calls: int, levels: list[str]
) -> None:
    fake_openai.respond_with(lambda body: answer("I refuse to produce JSON."))
    with pytest.raises(StructuredOutputError):
        await structured_llm_call(make_llm(fake_openai, abilities=abilities), MESSAGES, SCHEMA)
    assert len(fake_openai.requests) == calls
    seen = [
        "native"
        if "tool_choice" in body
        else "json"
        if body.get("response_format") == {"type": "json_object"}
        else "plain"
        for body in fake_openai.requests
    ]
    assert seen == levels
    assert fake_openai.requests[0]["messages"][0] == MESSAGES[0]


async def test_level1_forced_tool_choice(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(tool_call("structured_output", {"n": 3}))
    result = await structured_llm_call(make_llm(fake_openai, abilities=BOTH), MESSAGES, SCHEMA)
    assert (result.value, result.level, result.calls) == ({"n": 3}, "native", 1)
    body = fake_openai.requests[0]
    assert body["tool_choice"] == {"type": "function", "function": {"name": "structured_output"}}
    assert body["tools"][0]["function"]["parameters"] == SCHEMA
    assert result.usage.prompt_tokens > 0


async def test_level2_reformat_retry_succeeds(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(answer("oops"), answer('{"n": 5}'))
    result = await structured_llm_call(
        make_llm(fake_openai, abilities={"json_mode": True}), MESSAGES, SCHEMA
    )
    assert (result.value, result.level, result.calls) == ({"n": 5}, "json_mode", 2)
    retry = fake_openai.requests[1]["messages"]
    assert retry[-2] == {"role": "assistant", "content": "oops"}
    assert retry[-1]["content"].startswith("Your previous response could not be parsed")


async def test_level3_regex_fallback_and_parse_fn(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(answer("the number is 9"))

    def regex(text: str) -> dict | None:
        match = re.search(r"number is (\d+)", text)
        return {"n": int(match.group(1))} if match else None

    result = await structured_llm_call(
        make_llm(fake_openai, abilities={}),
        MESSAGES,
        SCHEMA,
        regex_fallback=regex,
        parse_fn=lambda raw: raw["n"] * 2,
    )
    assert (result.value, result.raw, result.level, result.calls) == (18, {"n": 9}, "plain", 1)


async def test_missing_required_key_fails_the_level(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(answer('{"m": 1}'), answer('{"n": 2}'))
    result = await structured_llm_call(make_llm(fake_openai, abilities={}), MESSAGES, SCHEMA)
    assert (result.value, result.calls) == ({"n": 2}, 2)


async def test_default_value_instead_of_error(fake_openai: FakeOpenAI) -> None:
    fake_openai.respond_with(lambda body: answer("nope"))
    result = await structured_llm_call(
        make_llm(fake_openai, abilities={}), MESSAGES, SCHEMA, default_value={"n": 0}
    )
    assert (result.value, result.level, result.calls) == ({"n": 0}, "default", 2)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ('Sure:\n```json\n{"a": {"b": [1, 2]}}\n```\nDone.', {"a": {"b": [1, 2]}}),
        ('noise {broken} then {"a": "}"} trailing', {"a": "}"}),
        ("[1, 2, 3]", None),
        ("no json", None),
        ("", None),
    ],
)
def test_extract_json(text: str, expected: dict | None) -> None:
    assert extract_json(text) == expected


def test_extract_json_returns_first_object() -> None:
    assert extract_json(json.dumps({"x": 1}) + " and " + json.dumps({"y": 2})) == {"x": 1}
