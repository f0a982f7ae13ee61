"""One retry policy for every outbound call: the model, connectors' HTTP, Feishu's Open API.

Built on tenacity. What a caller decides is only *what* is worth another attempt (a 5xx, a
throttled answer, an idempotent method); how many attempts, how long to wait and how a
server's own hint is read are the same everywhere:
- the server's `Retry-After` (seconds or an HTTP date; `retry-after-ms`; Feishu's
  `x-ogw-ratelimit-reset`) wins over our backoff, so a rate-limited API is not hammered;
- otherwise exponential backoff from `base_s`, optionally with jitter;
- both capped at `max_s`, so a server cannot park a run for an hour.

It lives in the engine (which imports nothing outside it) so that the engine, connectors and
surfaces can all share it.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

from tenacity import AsyncRetrying, RetryCallState, stop_after_attempt
from tenacity.retry import retry_base

# headers a server says how long to wait in, in seconds (or an HTTP date), first one wins
HINT_HEADERS = ("retry-after", "x-ogw-ratelimit-reset")  # the latter: Feishu/Lark's quota reset


def parse_retry_after(value: str | None) -> float | None:
    """A `Retry-After` value as seconds from now: a number, or an HTTP date (a date without
    a zone is read as UTC, as HTTP dates are); None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def hinted_delay(headers: Mapping[str, str] | None) -> float | None:
    """The wait a response's headers ask for (see `HINT_HEADERS`), in seconds, or None."""
    if not headers:
        return None
    lower = {str(k).lower(): str(v) for k, v in headers.items()}
    if ms := lower.get("retry-after-ms"):  # OpenAI's, more precise than retry-after
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    for name in HINT_HEADERS:
        seconds = parse_retry_after(lower.get(name))
        if seconds is not None:
            return seconds
    return None


@dataclass(frozen=True, kw_only=True)
class RetryPolicy:
    """`attempts` in all (the first one included), capped exponential backoff between them.

    `jitter` spreads each backoff by +/- that fraction (0.25: 75%..125%) so that many clients
    failing together do not retry together; a server's hint is used as given (capped).
    """

    attempts: int = 3
    base_s: float = 0.5
    max_s: float = 30.0
    jitter: float = 0.0

    def delay(self, attempt: int, hinted: float | None = None) -> float:
        """Seconds to wait before attempt `attempt + 1` (`attempt` counts from 0)."""
        if hinted is not None:
            return min(hinted, self.max_s)
        backoff = min(self.base_s * (2**attempt), self.max_s)
        if self.jitter:
            backoff *= 1 - self.jitter + 2 * self.jitter * random.random()  # noqa: S311
        return backoff

    def retrying(
        self,
        *,
        retry: retry_base | Callable[[RetryCallState], bool],
        hint: Callable[[RetryCallState], float | None] = lambda _: None,
        attempts: int | None = None,
        before_sleep: Callable[[RetryCallState], Any] | None = None,
    ) -> AsyncRetrying:
        """A tenacity controller for one call: `retry` says what is worth another attempt,
        `hint` reads the server's wait from the last outcome. A last exception is raised as
        it was; a last unwanted result is returned as it is (the caller reports it)."""
        return AsyncRetrying(
            stop=stop_after_attempt(max(1, self.attempts if attempts is None else attempts)),
            retry=retry,
            wait=lambda state: self.delay(state.attempt_number - 1, hint(state)),
            before_sleep=before_sleep,
            retry_error_callback=_last_result,
        )


def _last_result(state: RetryCallState) -> Any:
    """Out of attempts: the last outcome as it was (its exception raised, or its result)."""
    assert state.outcome is not None
    return state.outcome.result()
