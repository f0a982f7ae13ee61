"""A model's reply as the bot reads it: the OpenAI chat wire format, taken tolerantly.

OpenAI-compatible servers (OpenAI, Azure, Ollama, vLLM, DeepSeek) differ in the small things: a
tool call's arguments as an object rather than JSON text, content as parts, reasoning under
either name, chunks with no delta. `parse_completion` reads a whole completion's JSON body,
`delta_text` one streamed chunk; `bot.engine.llm` does the requests.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from bot.engine.events import TokenUsage


@dataclass(frozen=True)
class ToolCall:
    """One function call requested by the model; `arguments` is the raw JSON text."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class LLMResponse:
    """One non-streaming completion."""

    content: str | None
    tool_calls: tuple[ToolCall, ...] = ()
    reasoning_content: str | None = None
    usage: TokenUsage = field(default_factory=TokenUsage)
    finish_reason: str | None = None


def parse_completion(data: Mapping[str, Any]) -> LLMResponse:
    """A chat.completion JSON body -> `LLMResponse` (tolerant of what local servers send)."""
    choice = data["choices"][0]
    message = choice.get("message") or {}
    calls = []
    for raw in message.get("tool_calls") or ():
        function = raw.get("function") if isinstance(raw, Mapping) else None
        function = function if isinstance(function, Mapping) else {}
        raw = raw if isinstance(raw, Mapping) else {}
        arguments = function.get("arguments")
        if not isinstance(arguments, str):  # some servers send an object, not JSON text
            arguments = json.dumps(arguments if arguments is not None else {})
        calls.append(
            ToolCall(
                id=str(raw.get("id") or ""),  # the engine gives every call a unique id
                name=str(function.get("name") or ""),
                arguments=arguments,
            )
        )
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    usage = data.get("usage") or {}
    content = message.get("content")
    if isinstance(content, list):  # content parts
        content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return LLMResponse(
        content=content,
        tool_calls=tuple(calls),
        reasoning_content=reasoning if isinstance(reasoning, str) else None,
        usage=TokenUsage(
            int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
        ),
        finish_reason=choice.get("finish_reason"),
    )


def delta_text(chunk: object) -> str | None:
    """A streamed chunk's content delta (`choices[0].delta.content`); None when it has none
    (a role-only or usage-only chunk, or one not shaped as a chunk at all)."""
    choices = chunk.get("choices") if isinstance(chunk, dict) else None
    first = choices[0] if isinstance(choices, list) and choices else None
    delta = first.get("delta") if isinstance(first, dict) else None
    content = delta.get("content") if isinstance(delta, dict) else None
    return content if isinstance(content, str) else None
