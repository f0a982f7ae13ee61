"""The engine's model, with a span around each call (tracing on only: off, the runtime gives the
engine the model itself, so a run pays nothing for traces it does not send).

A wrapper rather than code in the engine: the engine knows the `LLM` protocol, not who watches
it. Spans carry the model's name and the tokens it reported, never the messages.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode, Tracer

from bot.engine.llm import LLM, LLMResponse, Message
from bot.observability.tracing import (
    ERROR_TYPE,
    INPUT_TOKENS,
    MODEL,
    OUTPUT_TOKENS,
    SPAN_ANSWER,
    SPAN_MODEL,
)


class TracedLLM:
    """`LLM` that opens a "model.chat" span per completion and a "model.answer" span per
    streamed answer, as children of whatever span is current (the run's)."""

    def __init__(self, llm: LLM, tracer: Tracer) -> None:
        self.model = llm.model
        self.abilities: Mapping[str, bool] = llm.abilities
        self._llm = llm
        self._tracer = tracer

    async def chat(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str | Mapping[str, Any] | None = None,
        response_format: Mapping[str, Any] | None = None,
    ) -> LLMResponse:
        with self._tracer.start_as_current_span(
            SPAN_MODEL, attributes={MODEL: self._llm.model},
            record_exception=False, set_status_on_exception=False,
        ) as span:  # fmt: skip
            try:
                response = await self._llm.chat(
                    messages, tools=tools, tool_choice=tool_choice, response_format=response_format
                )
            except BaseException as exc:
                _failed(span, exc)
                raise
            span.set_attribute(INPUT_TOKENS, response.usage.prompt_tokens)
            span.set_attribute(OUTPUT_TOKENS, response.usage.completion_tokens)
            return response

    async def stream_chat(self, messages: Sequence[Message]) -> AsyncIterator[str]:
        # started and ended by hand, never made current: a generator's context may be closed
        # from another task than the one that started it
        span = self._tracer.start_span(
            SPAN_ANSWER, attributes={MODEL: self._llm.model},
            record_exception=False, set_status_on_exception=False,
        )  # fmt: skip
        deltas = 0
        try:
            async for delta in self._llm.stream_chat(messages):
                deltas += 1
                yield delta
        except GeneratorExit:  # the reader stopped early (a stop): not the model's failure
            raise
        except BaseException as exc:
            _failed(span, exc)
            raise
        finally:
            span.set_attribute("chatops.answer.deltas", deltas)
            span.end()


def _failed(span: trace.Span, exc: BaseException) -> None:
    """The error's type only: its text may quote the server's words or the endpoint."""
    span.set_attribute(ERROR_TYPE, type(exc).__name__)
    span.set_status(Status(StatusCode.ERROR))
