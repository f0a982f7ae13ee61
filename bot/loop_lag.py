"""Event-loop lag: how late the serve process's event loop wakes a task that asked to sleep.

A task that blocks the loop (CPU-heavy work, a synchronous call) delays every other request;
`/healthz` reports the lag so an operator (or a benchmark) can see it. `LoopLag` sleeps
`interval_s` in a loop and records how much later than asked it woke, keeping the samples of
the last `window_s` (bounded) to summarise: p50, p99 and max in milliseconds; each sample also
goes to `on_sample` (seconds: the metrics' histogram). One per app.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Callable

INTERVAL_S = 0.05
WINDOW_S = 10.0


class LoopLag:
    """Samples the running loop's lag while `start()`ed; `summary()` is the recent window."""

    def __init__(
        self,
        *,
        interval_s: float = INTERVAL_S,
        window_s: float = WINDOW_S,
        clock: Callable[[], float] = time.monotonic,
        on_sample: Callable[[float], None] | None = None,
    ) -> None:
        self.interval_s = interval_s
        self._on_sample = on_sample
        self.window_s = window_s
        self._clock = clock
        # (when, lag in ms); one sample per interval at most, so the window bounds its length
        self._samples: deque[tuple[float, float]] = deque(maxlen=int(window_s / interval_s) + 1)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._sample(), name="loop-lag")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _sample(self) -> None:
        while True:  # until stop() cancels it
            asked = self._clock()
            await asyncio.sleep(self.interval_s)
            woke = self._clock()
            lag_s = max(0.0, woke - asked - self.interval_s)
            self._samples.append((woke, lag_s * 1000))
            if self._on_sample is not None:
                self._on_sample(lag_s)

    def summary(self) -> dict[str, float | int]:
        """p50, p99 and max lag (ms) over the last `window_s`, and how many samples that is."""
        since = self._clock() - self.window_s
        lags = sorted(lag for at, lag in self._samples if at >= since)
        if not lags:
            return {"p50": 0.0, "p99": 0.0, "max": 0.0, "samples": 0}

        def pick(q: float) -> float:
            return round(lags[min(len(lags) - 1, round(q * (len(lags) - 1)))], 1)

        return {"p50": pick(0.50), "p99": pick(0.99), "max": round(lags[-1], 1),
                "samples": len(lags)}  # fmt: skip
