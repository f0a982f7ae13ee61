"""Leases: which process advances which run, and who is gone.

Every `chatops serve` process has an identity (host, pid, start) and a `bot_process` row whose
lease its heartbeat renews; every run it advances carries it as `owner` with a `lease_until`
renewed by the same heartbeat, and a lease epoch (the fencing token, `bot.storage.fencing`)
that every adoption raises. Leases are set and judged by the database's clock. A process is
gone when its lease lapsed, or at once when it ran
on this host and its pid no longer exists (a crash on one machine is not waited out). What a
gone process owned (runs, unprocessed inbox events) is taken over with a conditional UPDATE
(`bot.storage.leases`): one taker wins. A process starting up takes nothing whose lease lives.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field

from bot.clock import AlignedClock
from bot.storage import leases as lease_queries
from bot.storage.database import Database
from bot.storage.fencing import Fence
from bot.storage.models import Conversation, InboxEvent, Run

log = logging.getLogger(__name__)

CLOCK_NOTED_S = 1.0  # a change of this host's offset from the database's clock worth a line


@dataclass(frozen=True)
class ProcessIdentity:
    """`host:pid:start-ms`: unique across restarts and machines."""

    host: str
    pid: int
    started_ms: int
    id: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "id", f"{self.host}:{self.pid}:{self.started_ms}")

    @classmethod
    def of_this_process(cls, node_name: str = "") -> ProcessIdentity:
        return cls(node_name or socket.gethostname(), os.getpid(), int(time.time() * 1000))


def parse_owner(owner: str) -> tuple[str, int] | None:
    """(host, pid) of an owner id, or None when it is not one of ours."""
    host, _, rest = owner.rpartition(":")
    host, _, pid = host.rpartition(":")
    if not host or not pid.isdigit() or not rest.isdigit():
        return None
    return host, int(pid)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def gone(owners: Iterable[str], live: Collection[str], me: ProcessIdentity) -> set[str]:
    """The owners among `owners` that are gone ('' is the owner of legacy, unowned rows).
    `live`: the processes whose lease has not lapsed by the database's clock."""
    dead: set[str] = set()
    for owner in owners:
        if owner == me.id:
            continue
        parsed = parse_owner(owner)
        same_host_gone = parsed is not None and parsed[0] == me.host and not pid_alive(parsed[1])
        if owner not in live or same_host_gone:
            dead.add(owner)
    return dead


class LeaseKeeper:
    """This process's leases (one per app): register, renew, release, and take over.

    Every lease is set and judged by the database's clock (`bot.storage.dbclock`), never
    this host's: a host whose clock runs ahead neither takes a live run nor loses its own."""

    def __init__(
        self,
        db: Database,
        identity: ProcessIdentity,
        lease_s: float,
        *,
        clock: AlignedClock | None = None,
    ) -> None:
        """`db`: the app's; the keeper runs its queries on a worker of its own, so a heartbeat
        never queues behind the runs' queries under load (a late beat would lose leases).
        `clock`: moved onto the database's clock at registration and at every beat."""
        self._db = Database(db.engine)
        self.identity = identity
        self.lease_s = lease_s
        self._clock = clock
        self._live = 1  # processes holding a live lease, as of the latest beat

    def live_processes(self) -> int:
        """How many processes share the work (this one included), as of the latest beat: a
        process's share of a budget that holds across processes (Slack's per workspace) is
        1/this. Read from memory: no statement."""
        return max(1, self._live)

    @property
    def me(self) -> str:
        return self.identity.id

    @property
    def beat_interval_s(self) -> float:
        """Three heartbeats per lease: one late beat never loses a run."""
        return self.lease_s / 3

    def fence(self, run: Run) -> Fence:
        """How this process holds `run` (owner, the epoch it took it at)."""
        return Fence(self.me, run.lease_epoch)

    def may_still_run(self, owner: str | None) -> bool:
        """Whether `owner` may still be working though its lease lapsed (a stalled process, a
        database outage): it may be posting an answer right now. Only a process of this host
        whose pid is gone is surely not."""
        if not owner or owner == self.me:
            return False
        parsed = parse_owner(owner)
        return parsed is None or parsed[0] != self.identity.host or pid_alive(parsed[1])

    async def register(self) -> None:
        await self._db.run(
            lease_queries.register_process,
            self.me,
            self.identity.host,
            self.identity.pid,
            self.lease_s,
        )
        self._counted(await self._db.run(lease_queries.live_count))
        await self._align()

    def _counted(self, live: int) -> None:
        if live != self._live:
            log.info("%d live process(es) share the platforms' per-workspace budgets", live)
        self._live = live

    async def renew(self, run_ids: Sequence[str]) -> list[lease_queries.RunLease]:
        """Renew the leases (and learn how many processes are live, in the same transaction)."""
        leases, live = await self._db.run(
            lease_queries.beat_and_count, self.me, self.lease_s, list(run_ids)
        )
        self._counted(live)
        await self._align()
        return leases

    async def _align(self) -> None:
        """Measure this host's offset from the database's clock, for the clock it was given."""
        if self._clock is None:
            return
        try:
            reading = await self._db.run(lease_queries.read_clock, self._clock.local)
        except Exception:  # noqa: BLE001 - the leases are renewed; the next beat measures
            log.warning("could not read the database's clock; the last offset holds")
            return
        before = self._clock.offset
        self._clock.observe(reading.database, reading.sent, reading.received)
        offset = self._clock.offset.total_seconds()
        if abs(offset - before.total_seconds()) > CLOCK_NOTED_S:
            side = "behind" if offset > 0 else "ahead of"
            log.info("this host's clock is %.1f s %s the database's; approvals go by the "
                     "database's", abs(offset), side)  # fmt: skip

    async def release(self) -> None:
        await self._db.run(lease_queries.release, self.me)

    async def close(self) -> None:
        await asyncio.to_thread(self._db.close)

    async def forget_long_gone(self, older_than_s: float = 86400.0) -> None:
        """Drop the rows of processes gone for a day (a crash leaves its row behind)."""
        await self._db.run(lease_queries.prune_processes, older_than_s)

    async def dead_owners(self) -> set[str]:
        owners = await self._db.run(lease_queries.foreign_owners, self.me)
        if not owners:
            return set()
        live = await self._db.run(lease_queries.live_processes)
        return gone(owners, live, self.identity)

    async def adoptable(
        self, dead: set[str], platforms: Collection[str]
    ) -> list[tuple[Run, Conversation]]:
        """Runs to take over, on the `platforms` this process has a surface for."""
        return await self._db.run(lease_queries.adoptable_runs, self.me, dead, platforms)

    async def claim(self, run: Run, dead: set[str]) -> bool:
        """Take `run` over; on success `run.lease_epoch` is the epoch this process holds."""
        epoch = await self._db.run(
            lease_queries.claim_run,
            run.id,
            self.me,
            seen_owner=run.owner,
            lease_s=self.lease_s,
            dead=dead,
        )
        if epoch is None:
            return False
        run.owner, run.lease_epoch = self.me, epoch
        return True

    async def claim_inbox(self, dead: set[str]) -> list[InboxEvent]:
        return await self._db.run(lease_queries.claim_inbox, self.me, dead)
