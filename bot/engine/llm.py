"""The LLM protocol the engine speaks, and its OpenAI-compatible implementation.

The engine knows only `LLM`; any OpenAI-compatible server (OpenAI, Azure, Ollama, vLLM,
DeepSeek) is reached through `OpenAICompatibleLLM` on the openai SDK.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from bot.engine.events import TokenUsage

Message = dict[str, Any]


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


class LLMError(Exception):
    """The model could not be reached or answered with an error after all retries."""


class LLM(Protocol):
    """What the engine needs from a model."""

    model: str
    abilities: Mapping[str, bool]

    async def chat(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str | Mapping[str, Any] | None = None,
        response_format: Mapping[str, Any] | None = None,
    ) -> LLMResponse: ...

    def stream_chat(self, messages: Sequence[Message]) -> AsyncIterator[str]: ...
