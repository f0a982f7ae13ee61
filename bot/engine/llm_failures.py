"""What a failed request to an OpenAI-compatible endpoint was: retried or not, its kind for
the metrics, and a short description that carries no secret and no header.

`bot.engine.llm.OpenAICompatibleLLM` asks these after every failed attempt.
"""

from __future__ import annotations

import openai
from tenacity import RetryCallState

from bot.engine.errors import EngineError
from bot.engine.retry import hinted_delay

RETRYABLE_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})
# the endpoint refuses the key or knows no such model: the settings are wrong, not the moment
CONFIGURATION_STATUS = frozenset({401, 403, 404})


class BadReply(EngineError):
    """A 200 reply the engine cannot use (retried like a 5xx); never leaves the client: its
    last attempt becomes an `LLMError`."""


def retryable(exc: BaseException) -> bool:
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code in RETRYABLE_STATUS
    # connection errors, timeouts (APITimeoutError subclasses it), bad replies
    return isinstance(exc, openai.APIConnectionError | BadReply)


def error_kind(exc: BaseException) -> str:
    """A failed request's kind, for the metrics (a fixed, small set)."""
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        if status == 429:
            return "rate_limited"
        if status in (401, 403):
            return "refused"
        if status == 404:
            return "not_found"
        return "server_error" if status >= 500 else "client_error"
    if isinstance(exc, openai.APITimeoutError):
        return "timeout"
    if isinstance(exc, openai.APIConnectionError):
        return "connection"
    return "bad_reply" if isinstance(exc, BadReply) else "other"


def retry_hint(state: RetryCallState) -> float | None:
    """The wait a 429/503 asks for (`retry-after-ms`, `Retry-After`)."""
    failure = state.outcome.exception() if state.outcome is not None else None
    if isinstance(failure, openai.APIStatusError):
        return hinted_delay(failure.response.headers)
    return None


def describe(exc: Exception) -> str:
    """A short, secret-free description: status and the server's message, never headers."""
    if isinstance(exc, openai.APIStatusError):
        body = exc.body if isinstance(exc.body, dict) else {}
        message = body.get("message") or (body.get("error") or {}).get("message") or ""
        return f"HTTP {exc.status_code}" + (f" ({short(message)})" if message else "")
    if isinstance(exc, openai.APITimeoutError):
        return "the request timed out"
    if isinstance(exc, openai.APIConnectionError):
        return "the server could not be reached"
    return short(str(exc))


def short(value: object, limit: int = 200) -> str:
    text = str(value)
    return text if len(text) <= limit else text[:limit] + "..."
