"""Whether each surface proved its credentials at start-up, for `/readyz` and the event routes.

A surface that the platform refused (a wrong token) or could not reach is down with a reason
that names the setting to check and the platform's error, never the secret. The server reports
every surface; a surface's own route answers 503 while it is down, so the platform retries
later instead of getting a 500. One `SurfaceHealth` per app (the runtime's), no module state.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class SurfaceState:
    """`ok`, or why not (`reason`); `checking`: start-up has not had its answer yet."""

    ok: bool
    reason: str = ""

    def as_json(self) -> dict[str, object]:
        return {"ok": True} if self.ok else {"ok": False, "reason": self.reason}


CHECKING = SurfaceState(ok=False, reason="checking credentials")
UP = SurfaceState(ok=True)


class SurfaceHealth:
    """Each enabled surface's state: `checking` until its start-up check answers."""

    def __init__(self) -> None:
        self._states: dict[str, SurfaceState] = {}
        self._changed = asyncio.Event()  # set and replaced at every change

    def checking(self, name: str) -> None:
        self._set(name, CHECKING)

    def up(self, name: str) -> None:
        self._set(name, UP)

    def down(self, name: str, reason: str) -> None:
        self._set(name, SurfaceState(ok=False, reason=reason))

    def _set(self, name: str, state: SurfaceState) -> None:
        self._states[name] = state
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def wait_until(self, predicate: Callable[[SurfaceHealth], object]) -> None:
        """Until `predicate(self)` holds (tests, and whatever waits for a surface's check)."""
        while not predicate(self):
            await self._changed.wait()

    def state(self, name: str) -> SurfaceState:
        """A surface never registered is up (the console needs no credentials)."""
        return self._states.get(name, UP)

    def refused(self, name: str) -> str | None:
        """Why events for `name` are refused now (it is down), or None while up or checking."""
        state = self.state(name)
        return None if state.ok or state is CHECKING else state.reason

    def as_json(self) -> dict[str, dict[str, object]]:
        return {name: state.as_json() for name, state in sorted(self._states.items())}
