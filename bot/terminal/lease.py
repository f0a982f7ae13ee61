"""The terminal's run is owned and leased like any `chatops serve` run.

`chatops chat` writes its run to the same database as `chatops serve`: a run with no owner, or
one whose lease nobody renews, is what a serve process's recovery adopts (and, finding no
surface for the terminal, fails). So the terminal has a process identity of its own, registers
it, keeps a heartbeat while the run is running (`LeaseKeeper`: leases set and judged by the
database's clock), ends the run only at the epoch it holds, and releases its lease at the end.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from bot.runs.leases import LeaseKeeper
from bot.storage.fencing import Fence
from bot.storage.models import Run

log = logging.getLogger(__name__)


class TerminalLease:
    """One terminal run's lease: `hold(run)` after the run is stored, `close()` at the end."""

    def __init__(self, keeper: LeaseKeeper) -> None:
        self.keeper = keeper
        self.run: Run | None = None
        self.lost = False
        self._beat: asyncio.Task[None] | None = None

    @property
    def me(self) -> str:
        return self.keeper.me

    @property
    def lease_s(self) -> float:
        return self.keeper.lease_s

    async def register(self) -> None:
        """The process row: live to every serve process while the heartbeat renews it."""
        await self.keeper.register()

    def hold(self, run: Run) -> None:
        """Start renewing `run`'s lease (stored with this process as its owner)."""
        self.run = run
        self._beat = asyncio.create_task(self._beat_loop(run.id), name=f"lease {run.id}")

    def fence(self) -> Fence | None:
        return self.keeper.fence(self.run) if self.run is not None else None

    async def _beat_loop(self, run_id: str) -> None:
        while True:
            await asyncio.sleep(self.keeper.beat_interval_s)
            try:
                leases = await self.keeper.renew([run_id])
            except Exception:  # noqa: BLE001 - the next beat tries again; leases last 3 beats
                log.exception("lease heartbeat of the terminal's run %s failed", run_id)
                continue
            if any(lease.owner != self.me for lease in leases) and not self.lost:
                self.lost = True
                log.warning("run %s: another process took it over (its lease lapsed)", run_id)

    async def close(self) -> None:
        """Stop the heartbeat, release the lease and the process row."""
        if self._beat is not None:
            self._beat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._beat
        try:
            await self.keeper.release()
        except Exception:  # noqa: BLE001 - the lease lapses by itself
            log.exception("could not release the terminal's lease")
        await self.keeper.close()
