"""The one retry policy (bot.engine.retry): the server's hint, capped backoff, attempts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest
from tenacity import retry_if_exception_type, retry_if_result

from bot.engine.retry import RetryPolicy, hinted_delay, parse_retry_after


def test_retry_after_is_seconds_or_an_http_date() -> None:
    assert parse_retry_after(" 2.5 ") == 2.5
    assert parse_retry_after("-3") == 0.0
    soon = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    assert 25 < (parse_retry_after(soon) or 0) <= 30
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 -0000") == 0.0  # past, zone-less
    assert parse_retry_after("tomorrow") is None and parse_retry_after(None) is None


def test_hint_headers_in_order_any_case() -> None:
    assert hinted_delay({"Retry-After-Ms": "1500", "Retry-After": "9"}) == 1.5
    assert hinted_delay({"Retry-After": "9", "x-ogw-ratelimit-reset": "4"}) == 9.0
    assert hinted_delay({"X-Ogw-Ratelimit-Reset": "4"}) == 4.0
    assert hinted_delay({"retry-after-ms": "x", "retry-after": "soon"}) is None
    assert hinted_delay(None) is None


def test_delay_is_the_hint_or_backoff_both_capped() -> None:
    policy = RetryPolicy(base_s=0.5, max_s=3.0)
    assert [policy.delay(n) for n in range(4)] == [0.5, 1.0, 2.0, 3.0]
    assert policy.delay(0, hinted=2.0) == 2.0 and policy.delay(0, hinted=3600) == 3.0
    jittered = RetryPolicy(base_s=1.0, max_s=30, jitter=0.25)
    assert all(0.75 <= jittered.delay(0) <= 1.25 for _ in range(200))


async def test_attempts_then_the_last_result_or_exception() -> None:
    policy = RetryPolicy(attempts=3, base_s=0)
    results = iter([503, 503, 503, 200])

    async def status() -> int:
        return next(results)

    assert await policy.retrying(retry=retry_if_result(lambda s: s == 503))(status) == 503
    assert next(results) == 200  # three attempts made, the fourth answer never asked for

    calls = []

    async def down() -> None:
        calls.append(1)
        raise ConnectionError("down")

    with pytest.raises(ConnectionError):
        await policy.retrying(retry=retry_if_exception_type(ConnectionError), attempts=2)(down)
    assert len(calls) == 2
