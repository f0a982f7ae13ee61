"""The other processes: the heartbeat that keeps this process's leases, and the wake-ups.

Each beat (three per lease) renews the process's and its runs' leases and reads the runs back:
one another process took over is let go here at once (`RunManager.lose`), and recovery is asked
to look for runs whose owner is gone. Its follow-up runs beside the beats, never ahead of the
next one: a run somebody stopped from another process is stopped here, the mail of its runs
taken, the approvals its runs wait for re-read. A follow-up slowed by a busy database or a stalled
surface delays no renewal, so it costs no lease. The beat is the slow safety net; `LISTEN/NOTIFY`
wake-ups (`bot.storage.wakeups`) bring the same news within milliseconds: a decision, a reply
or a stop for one of this process's runs, or another process letting its runs go.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from bot.approvals.broker import ApprovalBroker
from bot.runs.manager import RunManager
from bot.statuses import UNFINISHED_RUN_STATES
from bot.storage import queries as queries
from bot.storage.leases import RunLease
from bot.storage.wakeups import Wakeup, Wakeups

log = logging.getLogger(__name__)


class PeerSync:
    """One per app: `start()` after the schema is ready, `close()` after the runs stopped."""

    def __init__(
        self,
        *,
        runs: RunManager,
        broker: ApprovalBroker,
        wakeups: Wakeups,
        look_for_orphans: Callable[[], None],
        stopped_elsewhere: Callable[[str, str], Awaitable[None]],
    ) -> None:
        """`look_for_orphans()`: ask recovery for a scan (runs and events of gone processes);
        `stopped_elsewhere(run_id, by)`: a Stop another process recorded, applied here."""
        self._runs = runs
        self._leases = runs.leases
        self._broker = broker
        self._wakeups = wakeups
        self._look_for_orphans = look_for_orphans
        self._stopped_elsewhere = stopped_elsewhere
        self._beat: asyncio.Task[None] | None = None
        self._follow_up: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    async def start(self) -> None:
        await self._leases.register()
        self._wakeups.start(self._heard)
        self._beat = asyncio.create_task(self._beat_loop(), name="lease heartbeat")

    async def close(self) -> None:
        """Stop beating, let this process's runs and inbox go, and say so to the others."""
        for beating in (self._beat, self._follow_up):
            if beating is not None:
                beating.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await beating
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        try:
            await self._leases.release()
            await self._wakeups.send(Wakeup("released", sender=self._leases.me))
        except Exception:  # noqa: BLE001 - the leases lapse by themselves
            log.exception("could not release this process's leases")
        await self._wakeups.close()
        await self._leases.close()

    async def _beat_loop(self) -> None:
        """Renew at a steady pace, each beat due an interval after the one before (not after
        the beat's work): a renewal late by a slow follow-up would lose the runs' leases."""
        loop = asyncio.get_running_loop()
        due = loop.time()
        while True:
            due += self._leases.beat_interval_s
            await asyncio.sleep(due - loop.time())
            try:
                leases = await self.renew()
            except Exception:  # noqa: BLE001 - the next beat tries again; leases last 3 beats
                log.exception("lease heartbeat failed")
                leases = []
            self._look_for_orphans()  # on recovery's task: a stalled follow-up delays no scan
            if self._follow_up is None or self._follow_up.done():
                self._follow_up = asyncio.create_task(self.follow_up(leases), name="beat work")
            due = max(due, loop.time())  # a beat that fell behind is not made up in a burst

    async def renew(self) -> list[RunLease]:
        """Renew this process's leases; a run another process took over is let go at once."""
        active = [a for a in self._runs.active_runs() if a.run_id and not a.lost]
        leases = await self._leases.renew([a.run_id for a in active])
        for lease in leases:
            if lease.status in UNFINISHED_RUN_STATES and lease.owner != self._leases.me:
                self._runs.lose(lease.run_id)
        return leases

    async def follow_up(self, leases: list[RunLease]) -> None:
        """A beat's work besides the renewal (`leases`: what the renewal read back)."""
        try:
            for lease in leases:
                held = lease.owner == self._leases.me
                if held and lease.stopped_by and lease.status in UNFINISHED_RUN_STATES:
                    await self._stopped_elsewhere(lease.run_id, lease.stopped_by)
            await self._runs.take_mail()
            await self._broker.poll()
        except Exception:  # noqa: BLE001 - the next beat's follow-up tries again
            log.exception("the heartbeat's follow-up failed")

    def _heard(self, wakeup: Wakeup) -> None:
        """A wake-up (on the listener's task: the work goes to a task of its own)."""
        if wakeup.kind == "released":
            if wakeup.sender != self._leases.me:
                self._look_for_orphans()
            return
        if not self._runs.hears(wakeup):
            return
        if wakeup.kind == "approval":
            self._spawn(self._broker.wake(wakeup.approval_id))
        elif wakeup.kind == "mail":
            self._spawn(self._runs.take_mail([wakeup.run_id]))
        elif wakeup.kind == "stop":
            self._spawn(self._stop(wakeup.run_id))

    async def _stop(self, run_id: str) -> None:
        run = await self._runs.db.run(queries.get_run, run_id)
        if run is not None and run.stopped_by and run.status in UNFINISHED_RUN_STATES:
            await self._stopped_elsewhere(run_id, run.stopped_by)

    def _spawn(self, work: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("acting on a wake-up failed", exc_info=task.exception())
