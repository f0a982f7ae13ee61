"""A monotonic clock and its sleep, turned by the test: what waits on it wakes only when the
test says time has passed (the edit limiter's budget, the status reporter's pacing)."""

from __future__ import annotations

import asyncio
import heapq
import itertools


class ManualMonotonic:
    """`clock()` is the time; `await clock.sleep(s)` ends once `advance` passes its deadline."""

    def __init__(self) -> None:
        self.now = 0.0
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._order = itertools.count()
        self._slept = asyncio.Condition()

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        future = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self.now + seconds, next(self._order), future))
        async with self._slept:
            self._slept.notify_all()
        await future

    @property
    def sleeping(self) -> int:
        """How many sleeps have not ended yet."""
        return sum(1 for *_, future in self._sleepers if not future.done())

    async def wait_sleeping(self, count: int, timeout: float = 10) -> None:  # noqa: ASYNC109
        """Wait until `count` sleeps are waiting for time to pass."""

        async def wait() -> None:
            async with self._slept:
                await self._slept.wait_for(lambda: self.sleeping == count)

        await asyncio.wait_for(wait(), timeout)

    def advance(self, seconds: float) -> None:
        self.now += seconds
        while self._sleepers and self._sleepers[0][0] <= self.now:
            _, _, future = heapq.heappop(self._sleepers)
            if not future.done():
                future.set_result(None)
