"""One source of wall-clock time: aware UTC, so stored times never mix naive and aware values.

`Clock` is the time the approval broker lives by (deadlines, escalation tiers): an object it is
given, so a test hands it a `ManualClock` and moves time forward instead of sleeping or
patching `time`. `chatops serve` gives it an `AlignedClock`: this host's time moved onto the
database's, so every process reads an approval's deadline as the same instant.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
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


class AlignedClock(Clock):
    """The real clock, moved by this host's offset from the database's clock, as the lease
    heartbeat last measured it (`observe`). An approval's deadline is written by the process
    that asks and judged by the one a click reaches: with each host's own clock a host a
    minute ahead would give every approval it asks a minute more on the others. Before the
    first measurement it is this host's clock."""

    def __init__(self, local: Callable[[], datetime] = utcnow) -> None:
        """`local`: this host's clock (a test gives it a skewed one)."""
        self._local = local
        self.offset = timedelta(0)

    def now(self) -> datetime:
        return self._local() + self.offset

    def local(self) -> datetime:
        """This host's own time, unmoved: what `observe` is given around a database read."""
        return self._local()

    def observe(self, database_time: datetime, sent: datetime, received: datetime) -> None:
        """The database said `database_time` between `sent` and `received` (this host's time):
        it is taken for the midpoint, to within half the round trip."""
        self.offset = as_utc(database_time) - (sent + (received - sent) / 2)


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
