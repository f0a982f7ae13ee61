"""Retry policy for connector HTTP calls: which attempts to repeat and how long to wait.

Only idempotent methods are retried (a repeated POST could create two incidents); the server's
`Retry-After` wins over our backoff, within a cap, so a rate-limited API is not hammered.
"""

from __future__ import annotations

from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from http import HTTPStatus

from bot.clock import utcnow

IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})
RETRYABLE_STATUSES = frozenset(
    {
        HTTPStatus.TOO_MANY_REQUESTS,
        HTTPStatus.INTERNAL_SERVER_ERROR,
        HTTPStatus.BAD_GATEWAY,
        HTTPStatus.SERVICE_UNAVAILABLE,
        HTTPStatus.GATEWAY_TIMEOUT,
    }
)


@dataclass(frozen=True)
class RetryPolicy:
    """`retries` extra attempts with exponential backoff from `base_delay_s`."""

    retries: int = 2
    base_delay_s: float = 0.5
    max_delay_s: float = 30.0

    def may_retry(self, method: str, attempt: int) -> bool:
        """`attempt` counts from 0; POST and PATCH are never repeated."""
        return method.upper() in IDEMPOTENT_METHODS and attempt < self.retries

    def delay(self, attempt: int, retry_after: str | None = None) -> float:
        """Seconds to wait before attempt `attempt + 1`."""
        hinted = parse_retry_after(retry_after)
        if hinted is not None:
            return min(hinted, self.max_delay_s)
        return min(self.base_delay_s * (2**attempt), self.max_delay_s)


def parse_retry_after(value: str | None) -> float | None:
    """`Retry-After` as seconds: a number, or an HTTP date; None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, (when - utcnow()).total_seconds())
