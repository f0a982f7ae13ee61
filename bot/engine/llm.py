"""The LLM protocol the engine speaks, and its OpenAI-compatible implementation.

The engine knows only `LLM`; any OpenAI-compatible server (OpenAI, Azure, Ollama, vLLM,
DeepSeek) is reached through `OpenAICompatibleLLM` on the openai SDK; what a failed request
was (retried or not, its kind, its description) is `bot.engine.llm_failures`; how its replies
are read, `bot.engine.llm_replies`.
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

import anyio._backends._asyncio  # noqa: F401 - see below
import httpx2
import openai
import openai.resources.chat.chat  # noqa: F401 - see below
from tenacity import RetryCallState, retry_if_exception

from bot.engine.errors import EngineError
from bot.engine.llm_failures import (
    CONFIGURATION_STATUS,
    BadReply,
    describe,
    error_kind,
    retry_hint,
    retryable,
    short,
)
from bot.engine.llm_replies import LLMResponse, delta_text, parse_completion
from bot.engine.retry import RetryPolicy

# The two imports above are made here, at start-up, because the first model call would
# otherwise make them on the request path, in the middle of a burst: the SDK's `client.chat`
# imports its chat resources on first use, and the end of a stream asks anyio for its asyncio
# backend, which anyio imports then (tests/server/test_startup_imports.py).
log = logging.getLogger(__name__)
_T = TypeVar("_T")

Message = dict[str, Any]


class LLMError(EngineError):
    """The model could not be reached or answered with an error after all retries.

    `str()` is for the log (the server's own message, the key masked); `user_message` is what a
    person is told: the endpoint's host (or the URL it could not reach) and what to check,
    never the key nor the server's words. `permanent`: the key is refused or the model does
    not exist (401, 403, 404): a configuration error, never hidden behind a fallback answer.
    """

    def __init__(self, message: str, *, user_message: str = "", permanent: bool = False) -> None:
        super().__init__(message)
        self.user_message = user_message or message
        self.permanent = permanent


class _Secret(Protocol):
    def get_secret_value(self) -> str: ...


class LLMSettings(Protocol):
    """What `OpenAICompatibleLLM.from_settings` reads (`bot.config.Settings` has all of it; the
    engine names only these fields, so it imports nothing of the bot above it)."""

    @property
    def openai_api_key(self) -> _Secret | None: ...
    @property
    def openai_base_url(self) -> str | None: ...
    @property
    def chatops_model(self) -> str: ...
    @property
    def chatops_compact_model(self) -> str: ...
    @property
    def llm_abilities(self) -> Mapping[str, bool]: ...
    @property
    def chatops_llm_timeout_s(self) -> float: ...
    @property
    def chatops_llm_max_retries(self) -> int: ...


class ModelMeter(Protocol):
    """Where the model's figures go (`bot.observability.metrics.Metrics` is one; the engine
    names only this, so it imports nothing of the bot above it)."""

    def model_attempt(self, call: str, seconds: float | None, error: str | None) -> None:
        """One request (`seconds` None: none went out); `error`: its kind when it failed."""

    def model_usage(self, prompt_tokens: int, completion_tokens: int) -> None: ...


class _Unmetered:
    """No meter: `chatops chat` and the engine's own tests count nothing."""

    def model_attempt(self, call: str, seconds: float | None, error: str | None) -> None:
        return None

    def model_usage(self, prompt_tokens: int, completion_tokens: int) -> None:
        return None


UNMETERED: ModelMeter = _Unmetered()  # stateless: one is enough


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


LLM_NOT_CONFIGURED = "LLM not configured: set OPENAI_API_KEY or OPENAI_BASE_URL"
_PLACEHOLDER_KEY = "not-needed"  # local servers (Ollama, vLLM) accept any key


class OpenAICompatibleLLM:
    """`LLM` over the openai SDK, with the shared retry policy (`bot.engine.retry`; the SDK's
    own retries are switched off: ours also retry a 200 without choices, and end in a clear
    `LLMError`).

    Non-streaming calls use the SDK's low-level `post(..., cast_to=httpx2.Response)` and parse
    the JSON here: the typed `chat.completions.create` costs several times more CPU per call,
    and the engine's per-iteration overhead budget (DESIGN §4) is 1.5 ms. Streams likewise:
    the SDK's `AsyncStream` (its SSE decoding, its error events) over `object` chunks, read
    here, not a pydantic model built per chunk (the typed stream was a seventh of a serve
    process's CPU in a burst, issue 29).
    """

    def __init__(
        self,
        *,
        model: str,
        abilities: Mapping[str, bool] | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 60.0,
        max_retries: int = 3,
        backoff_base_s: float = 0.5,
        backoff_max_s: float = 30.0,
        meter: ModelMeter = UNMETERED,
        http_client: httpx2.AsyncClient | None = None,
    ) -> None:
        """`meter`: counts every request's latency and failure and the tokens reported."""
        self.model = model
        self.meter = meter
        self.abilities: Mapping[str, bool] = dict(
            abilities if abilities is not None else {"tool_call": True, "json_mode": True}
        )
        self.max_retries = max_retries
        self.retry_policy = RetryPolicy(
            attempts=max_retries + 1, base_s=backoff_base_s, max_s=backoff_max_s, jitter=0.25
        )
        self._configured = bool(api_key or base_url)
        self._key = api_key or ""
        self._client = openai.AsyncOpenAI(
            base_url=base_url,
            api_key=api_key or _PLACEHOLDER_KEY,
            timeout=timeout_s,
            max_retries=0,
            http_client=http_client,  # None: the SDK's default
        )

    @classmethod
    def from_settings(
        cls,
        settings: LLMSettings,
        *,
        meter: ModelMeter = UNMETERED,
        http_client: httpx2.AsyncClient | None = None,
    ) -> OpenAICompatibleLLM:
        """Model, endpoint, key, abilities and retry budget from `Settings`; `http_client`:
        the transport the bot picks (`bot.model_http`), else the SDK's default."""
        key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
        return cls(
            model=settings.chatops_model,
            abilities=settings.llm_abilities,
            base_url=settings.openai_base_url or None,
            api_key=key,
            timeout_s=settings.chatops_llm_timeout_s,
            max_retries=settings.chatops_llm_max_retries,
            meter=meter,
            http_client=http_client,
        )

    def with_model(self, model: str) -> OpenAICompatibleLLM:
        """The same endpoint, client, abilities and retries for another model (a cheaper one
        for compaction); the client is shared, so closing this one's owner is enough."""
        other = copy.copy(self)
        other.model = model
        return other

    def compact_llm(self, settings: LLMSettings) -> OpenAICompatibleLLM | None:
        """The compaction model `CHATOPS_COMPACT_MODEL` names, or None (the run's own)."""
        name = settings.chatops_compact_model.strip()
        return self.with_model(name) if name and name != self.model else None

    async def close(self) -> None:
        await self._client.close()

    async def chat(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str | Mapping[str, Any] | None = None,
        response_format: Mapping[str, Any] | None = None,
    ) -> LLMResponse:
        body: dict[str, Any] = {"model": self.model, "messages": list(messages)}
        if tools:
            body["tools"] = list(tools)
            if tool_choice is not None:
                body["tool_choice"] = tool_choice
        if response_format is not None:
            body["response_format"] = dict(response_format)
        data = await self._with_retries(lambda: self._post(body), call="chat")
        response = parse_completion(data)
        self.meter.model_usage(response.usage.prompt_tokens, response.usage.completion_tokens)
        return response

    async def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        response = await self._client.post("/chat/completions", body=body, cast_to=httpx2.Response)
        try:
            data = response.json()
        except ValueError as exc:
            size = len(response.content)
            raise BadReply(f"the server answered with non-JSON ({size} bytes)") from exc
        if not isinstance(data, dict) or not data.get("choices"):
            detail = data.get("error") if isinstance(data, dict) else None
            raise BadReply(f"the reply has no choices ({short(detail)})")
        return data

    async def stream_chat(self, messages: Sequence[Message]) -> AsyncIterator[str]:
        """Content deltas of one streamed completion; retried only before the first delta."""
        body = {"model": self.model, "messages": list(messages), "stream": True}
        stream = await self._with_retries(
            lambda: self._client.post(
                "/chat/completions",
                body=body,
                cast_to=object,
                stream=True,
                stream_cls=openai.AsyncStream[object],
            ),
            call="stream",
        )
        try:
            async for chunk in stream:
                text = delta_text(chunk)
                if text:
                    yield text
        except openai.OpenAIError as exc:
            self.meter.model_attempt("stream", None, "stream_broken")
            raise LLMError(
                f"the model's stream from {self.model} broke: {self._describe(exc)}",
                user_message=f"the answer's stream from the model endpoint {self._host()} broke",
            ) from exc
        finally:
            await stream.close()

    async def _with_retries(self, request: Callable[[], Awaitable[_T]], *, call: str) -> _T:
        """`request` under the retry policy, each attempt metered as `call` (chat, stream)."""
        if not self._configured:
            self.meter.model_attempt(call, None, "not_configured")
            raise LLMError(LLM_NOT_CONFIGURED, permanent=True)
        retrying = self.retry_policy.retrying(
            retry=retry_if_exception(retryable),
            hint=retry_hint,
            before_sleep=self._log_retry,
        )

        async def attempt() -> _T:  # tenacity awaits coroutine functions, not lambdas
            started = time.monotonic()
            try:
                result = await request()
            except Exception as exc:
                self.meter.model_attempt(call, time.monotonic() - started, error_kind(exc))
                raise
            self.meter.model_attempt(call, time.monotonic() - started, None)
            return result

        try:
            return await retrying(attempt)
        except (openai.APIStatusError, openai.APIConnectionError, BadReply) as exc:
            attempts = retrying.statistics.get("attempt_number", 1)
            tried = f"{attempts} attempt{'s' if attempts > 1 else ''}"
            raise LLMError(
                f"the model {self.model} could not answer after {tried}: {self._describe(exc)}",
                user_message=self._user_message(exc),
                permanent=isinstance(exc, openai.APIStatusError)
                and exc.status_code in CONFIGURATION_STATUS,
            ) from exc

    def _host(self) -> str:
        return httpx2.URL(str(self._client.base_url)).host or str(self._client.base_url)

    def _describe(self, exc: Exception) -> str:
        """`llm_failures.describe` with this endpoint's key masked (a server may echo it back)."""
        text = describe(exc)
        return text.replace(self._key, "[REDACTED]") if len(self._key) >= 4 else text

    def _user_message(self, exc: Exception) -> str:
        """What a person is told: where, what happened, what to check; never the key."""
        host, url = self._host(), str(self._client.base_url).rstrip("/")
        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            if status in (401, 403):
                return f"the model endpoint {host} refused the key ({status}): check OPENAI_API_KEY"
            if status == 404:
                return (
                    f"the model endpoint {host} does not know the model {self.model} or the "
                    "path (404): check CHATOPS_MODEL and OPENAI_BASE_URL"
                )
            return f"the model endpoint {host} answered with an error ({status})"
        if isinstance(exc, openai.APITimeoutError):
            return f"the model endpoint {url} did not answer in time"
        if isinstance(exc, openai.APIConnectionError):
            return f"the model endpoint {url} could not be reached: check OPENAI_BASE_URL"
        return f"the model endpoint {host} sent a reply that could not be used"

    def _log_retry(self, state: RetryCallState) -> None:
        failure = state.outcome.exception() if state.outcome is not None else None
        log.warning(
            "LLM call failed (%s); retry %d/%d in %.2fs",
            self._describe(failure) if isinstance(failure, Exception) else "no answer",
            state.attempt_number,
            self.max_retries,
            state.upcoming_sleep,
        )
