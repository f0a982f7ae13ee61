"""Slack's edit budget: `chat.update` is Tier 3 (about 50 a minute per workspace), so every edit
goes through one `UpdateLimiter` owned by the surface; HTTP 429 is retried by slack_sdk's
rate-limit retry handler, which also pauses the limiter for the Retry-After the server asked
for and counts the 429 (`chatops_platform_api_rate_limited_total`); a burst of 5xx and a
dropped connection are retried with backoff (`retry_handlers`). Answer streams and
agent-session updates have budgets of their own (other tiers): a limiter each, built the same
way.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Awaitable, Callable
from typing import Any

from slack_sdk.http_retry.async_handler import AsyncRetryHandler
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
    AsyncServerErrorRetryHandler,
)
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState

from bot.engine.retry import parse_retry_after
from bot.observability.metrics import PlatformMeter

UPDATES_PER_MINUTE = 40.0  # below chat.update's Tier 3 (50+/min per workspace)
UPDATE_BURST = 10
SERVER_ERRORS = frozenset({500, 502, 503, 504})  # Slack's own outages: worth another try
SERVER_ERROR_RETRIES = 4  # backoff 0.5, 1, 2, 4 s: a burst of a few seconds is ridden out


class UpdateLimiter:
    """A token bucket per workspace for `chat.update`, shared by every run of the process.

    Edits wait in priority order: an `urgent` one (an approval card showing its outcome) goes
    before every ordinary one (a status message) waiting for the same workspace's budget, even
    one that was already waiting, so decided cards lose their buttons first under load.

    Slack's budget is per workspace, not per process: with `share` (how many processes are
    live, from their heartbeats) this process paces each workspace to its share, the rate and
    the burst divided by that number, read at every edit (from memory) and so following the
    processes that come and go within a heartbeat.
    """

    def __init__(
        self,
        *,
        per_minute: float = UPDATES_PER_MINUTE,
        burst: int = UPDATE_BURST,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
        share: Callable[[], int] = lambda: 1,
    ) -> None:
        self.share = share  # the other budgets of the surface divide by the same number
        self._clock = clock
        self._sleep = sleep
        self.rate = per_minute / 60.0
        self.burst = float(burst)
        self._tokens: dict[str, float] = {}
        self._stamp: dict[str, float] = {}
        self._queues: dict[str, list[tuple[int, int]]] = {}  # heap of (priority, arrival)
        self._turns: dict[str, asyncio.Event] = {}  # set when a workspace's queue changes
        self._arrivals = itertools.count()
        self._paused_until = 0.0
        self.queue_changed = asyncio.Condition()  # observers (tests, figures) wait on it

    def pause(self, seconds: float) -> None:
        """Slack said 429: no workspace edit starts before `seconds` from now."""
        self._paused_until = max(self._paused_until, self._clock() + seconds)

    def waiting(self, workspace: str) -> tuple[int, int]:
        """(urgent, ordinary) edits waiting for `workspace`'s budget."""
        queue = self._queues.get(workspace, [])
        urgent = sum(1 for priority, _ in queue if priority == 0)
        return urgent, len(queue) - urgent

    def short(self, workspace: str) -> bool:
        """True while edits of `workspace` are queueing for the budget."""
        return bool(self._queues.get(workspace))

    async def acquire(self, workspace: str, *, urgent: bool = False) -> None:
        """Wait until an edit may be sent for `workspace` (urgent ones first, then by arrival)."""
        ticket = (0 if urgent else 1, next(self._arrivals))
        queue = self._queues.setdefault(workspace, [])
        heapq.heappush(queue, ticket)
        await self._changed(workspace)
        try:
            while True:
                if queue[0] != ticket:  # someone goes first: wait for the queue to move
                    await self._turns.setdefault(workspace, asyncio.Event()).wait()
                    continue
                delay = self._take(workspace)
                if delay <= 0:
                    return
                await self._sleep(delay)  # the budget refills meanwhile
        finally:
            queue.remove(ticket)
            heapq.heapify(queue)
            if not queue:
                del self._queues[workspace]
            await asyncio.shield(self._changed(workspace))

    def _take(self, workspace: str) -> float:
        """Take a token now (0.0), or say how long until one is there."""
        now = self._clock()
        if now < self._paused_until:
            return self._paused_until - now
        processes = max(1, self.share())
        rate, burst = self.rate / processes, max(1.0, self.burst / processes)
        last = self._stamp.get(workspace, now)
        tokens = min(burst, self._tokens.get(workspace, burst) + (now - last) * rate)
        self._stamp[workspace] = now
        if tokens >= 1.0:
            self._tokens[workspace] = tokens - 1.0
            return 0.0
        self._tokens[workspace] = tokens
        return (1.0 - tokens) / rate

    async def _changed(self, workspace: str) -> None:
        turn = self._turns.pop(workspace, None)
        if turn is not None:
            turn.set()  # every waiter of the workspace looks again at who is first
        async with self.queue_changed:
            self.queue_changed.notify_all()


class LimiterPausingRetryHandler(AsyncRateLimitErrorRetryHandler):
    """slack_sdk's 429 handler (sleeps Retry-After, then retries) that also pauses the limiter
    and counts the 429 on `meter`, by the method the request was for."""

    def __init__(
        self,
        limiter: UpdateLimiter,
        *,
        max_retry_count: int = 6,
        meter: PlatformMeter | None = None,
    ) -> None:
        super().__init__(max_retry_count=max_retry_count)
        self.limiter = limiter
        self.meter = meter

    async def prepare_for_next_attempt_async(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> None:
        if self.meter is not None:
            self.meter.rate_limited(method_of(request.url))
        if response is not None:
            values = {k.lower(): v for k, v in response.headers.items()}.get("retry-after")
            hinted = parse_retry_after(values[0]) if values else None
            self.limiter.pause(1.0 if hinted is None else hinted)
        await super().prepare_for_next_attempt_async(
            state=state, request=request, response=response, error=error
        )


class ServerErrorRetryHandler(AsyncServerErrorRetryHandler):
    """slack_sdk's 5xx handler, for the gateway errors too (its own takes 500 and 503)."""

    async def _can_retry_async(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> bool:
        return response is not None and response.status_code in SERVER_ERRORS


def method_of(url: str) -> str:
    """The Web API method a request URL names (`.../api/chat.update?x=1` -> `chat.update`)."""
    return url.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]


def retry_handlers(
    limiter: UpdateLimiter, meter: PlatformMeter | None = None
) -> list[AsyncRetryHandler]:
    """What the bot's Slack client retries: 429 (pausing the limiter, counted on `meter`), 5xx
    bursts and dropped connections (slack_sdk's default, which a custom list would otherwise
    lose)."""
    return [
        LimiterPausingRetryHandler(limiter, meter=meter),
        ServerErrorRetryHandler(max_retry_count=SERVER_ERROR_RETRIES),
        AsyncConnectionErrorRetryHandler(),
    ]
