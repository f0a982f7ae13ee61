"""StopSignal: a person asked a run to stop. The engine ends the run at once where it can, and
never leaves a tool call half done.

Unlike cancelling the run's task (shutdown does that, cutting whatever is under way), a stop:
- abandons the model call in flight (`race`: the call is cancelled, `RunStopped` raised);
- lets a tool that has started finish and its call-log row complete; its result is not acted
  on (the loop ends before the model reads it);
- refuses every tool call not yet started (`requested` is checked before each).
Approval waits are ended by the runtime (it cancels the run's pending approvals), so a gate
returns and the loop reaches its next check.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

from bot.engine.errors import EngineError

T = TypeVar("T")


class RunStopped(EngineError):
    """The run was stopped by a person (`by`); raised out of `ReActAgent.run()`."""

    def __init__(self, by: str) -> None:
        super().__init__(f"the run was stopped by {by or 'someone'}")
        self.by = by


class StopSignal:
    """One run's stop request: set once, by whom; the engine checks it and races model calls."""

    def __init__(self) -> None:
        self._event = asyncio.Event()
        self.by = ""

    @property
    def requested(self) -> bool:
        return self._event.is_set()

    def request(self, by: str) -> bool:
        """Ask the run to stop; False if a stop was already asked for (the first one wins)."""
        if self._event.is_set():
            return False
        self.by = by
        self._event.set()
        return True

    def check(self) -> None:
        """Raise `RunStopped` if a stop was asked for."""
        if self._event.is_set():
            raise RunStopped(self.by)

    async def wait(self) -> None:
        await self._event.wait()

    async def race(self, work: Awaitable[T]) -> T:
        """`work`, unless a stop comes first: then `work` is cancelled (and awaited) and
        `RunStopped` raised. Use it for what may be abandoned (model calls), never for a tool."""
        self.check()
        task = asyncio.ensure_future(work)
        stop = asyncio.ensure_future(self._event.wait())
        try:
            await asyncio.wait((task, stop), return_when=asyncio.FIRST_COMPLETED)
        except BaseException:  # we were cancelled ourselves: leave nothing behind
            task.cancel()
            stop.cancel()
            await asyncio.gather(task, stop, return_exceptions=True)
            raise
        stop.cancel()
        if task.done():
            return task.result()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        raise RunStopped(self.by)
