"""One source of wall-clock time: aware UTC, so stored times never mix naive and aware values.

`Clock` is the time the approval broker lives by (deadlines, escalation tiers): an object it is
given, so a test hands it a `ManualClock` and moves time forward instead of sleeping or
patching `time`.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import UTC, datetime, timedelta
from typing import Any


def utcnow() -> datetime:
    """The current time as an aware UTC datetime."""
    return datetime.now(UTC)


def as_utc(value: datetime) -> datetime:
    """Re-attach UTC to a naive datetime read back from SQLite (which drops tzinfo)."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class Clock:
    """The real clock: `now()` and a wait that ends at a deadline or when a future is done."""

    def now(self) -> datetime:
        return utcnow()

    async def wait(self, future: asyncio.Future[Any], deadline: datetime) -> bool:
        """Wait for `future` (shielded: never cancelled by this) until `deadline`; True when
        the future is done."""
        timeout = max(0.0, (deadline - self.now()).total_seconds())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(future), timeout)
        return future.done()


class ManualClock(Clock):
    """A clock that moves only when told (`advance`): waits past a deadline end at once."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or utcnow()
        self._moved: set[asyncio.Future[None]] = set()

    def now(self) -> datetime:
        return self._now

    def advance(self, seconds: float) -> None:
        """Move time forward and wake every wait, which looks at its deadline again."""
        self._now += timedelta(seconds=seconds)
        for moved in list(self._moved):
            if not moved.done():
                moved.set_result(None)

    async def wait(self, future: asyncio.Future[Any], deadline: datetime) -> bool:
        while not future.done() and self._now < deadline:
            moved = asyncio.get_running_loop().create_future()
            self._moved.add(moved)
            try:
                await asyncio.wait({future, moved}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                self._moved.discard(moved)
        return future.done()
