"""Admission: how many runs work at once (`CHATOPS_MAX_WORKING_RUNS`), the rest queue in order.

Under a burst, runs that all start at once are all slow: every thread waits on every other
thread's model calls, writes and edits. Past the limit a run posts its status message at once
("Queued: N ahead of you") and starts working when a seat frees, first come first served.
A run waiting for a person (an approval) works on nothing: it gives its seat up meanwhile
and takes one back, without queueing again, when the decision arrives (the person already
waited). Per process: each `chatops serve` admits its own runs.
"""

from __future__ import annotations

import asyncio
from collections import deque


class Admission:
    """The seats of one process (see the module docstring)."""

    def __init__(self, limit: int) -> None:
        self._limit = max(1, limit)
        self._working = 0
        self._queue: deque[Seat] = deque()

    @property
    def working(self) -> int:
        return self._working

    @property
    def queued(self) -> int:
        return len(self._queue)

    def ask(self) -> Seat:
        """A seat: taken now if one is free and nobody queues, else queued (`Seat.ahead`)."""
        seat = Seat(self, ahead=len(self._queue))
        if not self._queue and self._working < self._limit:
            self._seat(seat)
        else:
            self._queue.append(seat)
        return seat

    def _seat(self, seat: Seat) -> None:
        self._working += 1
        seat._seated = True
        seat._admitted.set_result(None)

    def _free(self) -> None:
        self._working -= 1
        self._admit_next()

    def _admit_next(self) -> None:
        while self._queue and self._working < self._limit:
            seat = self._queue.popleft()
            if not seat._admitted.done():  # else it left while queued
                self._seat(seat)

    def _drop(self, seat: Seat) -> None:
        if seat in self._queue:
            self._queue.remove(seat)


class Seat:
    """One run's place: `wait()` until admitted, `step_out()` / `step_in()` around a wait for
    a person, `leave()` when the run ends (each safe to call again)."""

    def __init__(self, admission: Admission, ahead: int) -> None:
        self.ahead = ahead  # runs queued before this one when it asked
        self._admission = admission
        self._admitted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._seated = False  # counted in `working` (admitted, not stepped out, not left)
        self._left = False
        self._out = 0  # waits for a person in progress (parallel tool calls: several)

    @property
    def queued(self) -> bool:
        return not self._admitted.done()

    async def wait(self) -> None:
        """Until admitted (at once when a seat was free)."""
        await asyncio.shield(self._admitted)

    def step_out(self) -> None:
        """A wait for a person begins: the seat goes to the next run in line."""
        self._out += 1
        if self._out == 1 and self._seated:
            self._seated = False
            self._admission._free()

    def step_in(self) -> None:
        """A wait for a person ended: seated again at once (over the limit if need be)."""
        self._out = max(0, self._out - 1)
        if self._out == 0 and not self._seated and not self._left and self._admitted.done():
            self._seated = True
            self._admission._working += 1

    def leave(self) -> None:
        """The run ended (or never started): its seat or its place in line goes."""
        if self._left:
            return
        self._left = True
        if not self._admitted.done():
            self._admitted.set_result(None)  # never admitted: nothing to free
            self._admission._drop(self)
            return
        if self._seated:
            self._seated = False
            self._admission._free()
