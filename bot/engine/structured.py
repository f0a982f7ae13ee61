"""structured_llm_call: one entry point for JSON that matches a schema, from any model.

Three levels, tried in order by what the model advertises (DESIGN §2, seed "structured_llm_call"):
L1 native function calling with a forced `tool_choice`; L2 `response_format=json_object` with one
reformat retry; L3 plain text through `extract_json` (+ `regex_fallback`) with one reformat
retry. Worst cases: 5 calls (tool_call + json_mode), 4 (json_mode only), 2 (plain text).
`LLMError` (the model unreachable after retries) is not a format failure and propagates.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from bot.engine import prompts
from bot.engine.errors import EngineError
from bot.engine.events import TokenUsage
from bot.engine.llm import LLM, LLMResponse, Message

T = TypeVar("T")
Level = Literal["native", "json_mode", "plain", "default"]
_DECODER = json.JSONDecoder()
_MISSING: Any = object()


class StructuredOutputError(EngineError):
    """Every level failed and no `default_value` was given."""


@dataclass(frozen=True)
class StructuredCallResult(Generic[T]):
    """The parsed value, the raw dict it came from, the level that worked and the cost."""

    value: T
    raw: dict[str, Any] | None
    level: Level
    calls: int
    usage: TokenUsage


def extract_json(text: str | None) -> dict[str, Any] | None:
    """The first JSON object in free text (code fences and prose around it are fine)."""
    if not text:
        return None
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            value = json.loads(stripped)
        except ValueError:
            pass
        else:
            if isinstance(value, dict):
                return value
    start = stripped.find("{")
    while start != -1:
        try:
            value, _ = _DECODER.raw_decode(stripped, start)
        except ValueError:
            start = stripped.find("{", start + 1)
            continue
        if isinstance(value, dict):
            return value
        start = stripped.find("{", start + 1)
    return None


class _Attempt(Generic[T]):
    """Counts calls and usage across levels and turns a raw dict into the caller's value."""

    def __init__(self, schema: Mapping[str, Any], parse_fn: Callable[[dict[str, Any]], T] | None):
        self.schema = schema
        self.parse_fn = parse_fn
        self.calls = 0
        self.usage = TokenUsage()

    def note(self, reply: LLMResponse) -> None:
        self.calls += 1
        self.usage = self.usage + reply.usage

    def accept(self, raw: dict[str, Any] | None) -> tuple[bool, Any]:
        if raw is None:
            return False, None
        missing = [key for key in self.schema.get("required", ()) if key not in raw]
        if missing:
            return False, None
        if self.parse_fn is None:
            return True, raw
        try:
            return True, self.parse_fn(raw)
        except (ValueError, TypeError, KeyError):
            return False, None


async def structured_llm_call(
    llm: LLM,
    messages: Sequence[Message],
    schema: Mapping[str, Any],
    *,
    name: str = "structured_output",
    description: str = "Return the requested data.",
    parse_fn: Callable[[dict[str, Any]], T] | None = None,
    regex_fallback: Callable[[str], dict[str, Any] | None] | None = None,
    default_value: Any = _MISSING,
) -> StructuredCallResult[Any]:
    """Get a dict matching `schema` (required keys checked; `parse_fn` may refine and raise)."""
    attempt: _Attempt[Any] = _Attempt(schema, parse_fn)
    schema_text = json.dumps(dict(schema))

    if llm.abilities.get("tool_call"):
        tool = {
            "type": "function",
            "function": {"name": name, "description": description, "parameters": dict(schema)},
        }
        reply = await llm.chat(
            messages, tools=[tool], tool_choice={"type": "function", "function": {"name": name}}
        )
        attempt.note(reply)
        raw = _from_tool_call(reply, name)
        ok, value = attempt.accept(raw)
        if ok:
            return StructuredCallResult(value, raw, "native", attempt.calls, attempt.usage)

    instructed = [
        *messages,
        prompts.user(prompts.STRUCTURED_INSTRUCTION.format(schema=schema_text)),
    ]
    if llm.abilities.get("json_mode"):
        found = await _with_one_retry(
            llm, instructed, attempt, schema_text, None, {"type": "json_object"}
        )
        if found is not None:
            return StructuredCallResult(
                found[1], found[0], "json_mode", attempt.calls, attempt.usage
            )

    found = await _with_one_retry(llm, instructed, attempt, schema_text, regex_fallback, None)
    if found is not None:
        return StructuredCallResult(found[1], found[0], "plain", attempt.calls, attempt.usage)

    if default_value is not _MISSING:
        return StructuredCallResult(default_value, None, "default", attempt.calls, attempt.usage)
    raise StructuredOutputError(
        f"no level produced JSON matching the schema after {attempt.calls} model calls"
    )


async def _with_one_retry(
    llm: LLM,
    messages: list[Message],
    attempt: _Attempt[Any],
    schema_text: str,
    regex_fallback: Callable[[str], dict[str, Any] | None] | None,
    response_format: Mapping[str, Any] | None,
) -> tuple[dict[str, Any], Any] | None:
    """One call, and on a parse failure one more with the reformat prompt."""
    conversation = list(messages)
    for _ in range(2):
        reply = await llm.chat(conversation, response_format=response_format)
        attempt.note(reply)
        text = reply.content or ""
        raw = extract_json(text)
        if raw is None and regex_fallback is not None:
            raw = regex_fallback(text)
        ok, value = attempt.accept(raw)
        if ok and raw is not None:
            return raw, value
        conversation += [
            prompts.assistant(text),
            prompts.user(prompts.STRUCTURED_REFORMAT.format(schema=schema_text)),
        ]
    return None


def _from_tool_call(reply: LLMResponse, name: str) -> dict[str, Any] | None:
    for call in reply.tool_calls:
        if call.name == name:
            try:
                value = json.loads(call.arguments or "{}")
            except ValueError:
                return None
            return value if isinstance(value, dict) else None
    return extract_json(reply.content)
