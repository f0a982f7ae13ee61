"""A surface proves its credentials at start-up, on a background task: the loop every surface
shares (Slack's `auth.test`, Feishu's tenant token).

The surface's `attempt` raises `CredentialsRefused` when the platform refuses a credential (a
wrong token: permanent for this process, one ERROR line naming the variable and the
platform's error) or `PlatformUnreachable` (a refused connection, a timeout, a 5xx: retried
with growing pauses, one WARNING line when it starts failing and one INFO line when it
succeeds). `SurfaceHealth` holds the state `/readyz` reports and the event routes read.
Secrets are never part of a message: only variable names and the platform's error codes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from bot.chat.health import SurfaceHealth
from bot.errors import SurfaceError

log = logging.getLogger(__name__)

RETRY_DELAYS_S = (1.0, 2.0, 5.0, 10.0, 30.0, 60.0)  # then every 60 s


class CredentialsRefused(SurfaceError):
    """The platform refused a credential: `variable` names it, `error` is what it said."""

    def __init__(self, variable: str, error: str) -> None:
        super().__init__(f"{error} (check {variable})")
        self.variable = variable
        self.error = error


class PlatformUnreachable(SurfaceError):
    """The platform could not be asked (network, timeout, its own outage): try again later.
    `setting` names what to check (the platform's address)."""

    def __init__(self, reason: str, setting: str) -> None:
        super().__init__(f"unreachable: {reason} (retrying; check {setting})")


Attempt = Callable[[], Awaitable[None]]


class SignIn:
    """`attempt` until it answers, on a task this object owns; the answer goes to `health`."""

    def __init__(
        self,
        name: str,
        attempt: Attempt,
        health: SurfaceHealth,
        *,
        what: str,
        delays: tuple[float, ...] = RETRY_DELAYS_S,
    ) -> None:
        self.name = name
        self._attempt = attempt
        self._health = health
        self._what = what  # "the bot token": what was accepted, for the log
        self._delays = delays
        self._task: asyncio.Task[None] | None = None
        self._answered = asyncio.Event()

    def start(self) -> None:
        self._health.checking(self.name)
        loop = asyncio.get_running_loop()
        self._task = loop.create_task(self._run(), name=f"{self.name}-sign-in")

    async def outcome(self) -> bool:
        """Wait until the platform has answered: True when it accepted the credentials."""
        await self._answered.wait()
        return self._health.state(self.name).ok

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self) -> None:
        failures = 0
        while True:
            try:
                await self._attempt()
            except CredentialsRefused as exc:
                self._health.down(self.name, str(exc))
                log.error("%s: down: credentials refused, %s; the other surfaces serve",
                          self.name, exc)  # fmt: skip
                self._answered.set()
                return
            except PlatformUnreachable as exc:
                self._health.down(self.name, str(exc))
                if failures == 0:
                    log.warning("%s: down: cannot check %s, %s", self.name, self._what, exc)
                delay = self._delays[min(failures, len(self._delays) - 1)]
                failures += 1
                await asyncio.sleep(delay)  # the platform's outage, not synchronisation
                continue
            self._health.up(self.name)
            log.info("%s: signed in (%s accepted)", self.name, self._what)
            self._answered.set()
            return


def short_reason(exc: BaseException) -> str:
    """One line of what failed (the exception's type when it says nothing)."""
    text = str(exc).strip()
    return text.splitlines()[0][:200] if text else type(exc).__name__
