"""Which connector HTTP calls are repeated; how long to wait is the shared policy's
(`bot.engine.retry`: the server's `Retry-After` within a cap, else capped backoff).

Only idempotent methods are retried (a repeated POST could create two incidents), and only
for answers that may go away: throttling, a server error, a timeout, a dropped connection.
"""

from __future__ import annotations

from http import HTTPStatus

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


def attempts_for(method: str, retries: int) -> int:
    """Attempts in all for one call: `retries` more for an idempotent method, else one."""
    return 1 + retries if method.upper() in IDEMPOTENT_METHODS else 1
