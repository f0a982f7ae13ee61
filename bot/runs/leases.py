"""Leases: which process advances which run, and who is gone.

Every `chatops serve` process has an identity (host, pid, start) and a `bot_process` row whose
lease its heartbeat renews; every run it advances carries it as `owner` with a `lease_until`
renewed by the same heartbeat. A process is gone when its lease lapsed, or at once when it ran
on this host and its pid no longer exists (a crash on one machine is not waited out). What a
gone process owned (runs, unprocessed inbox events) is taken over with a conditional UPDATE
(`bot.storage.leases`): one taker wins. A process starting up takes nothing whose lease lives.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from bot.clock import as_utc, utcnow
from bot.storage import leases as lease_queries
from bot.storage.database import Database
from bot.storage.models import BotProcess, Conversation, InboxEvent, Run


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


def gone(
    owners: Iterable[str], processes: Sequence[BotProcess], me: ProcessIdentity, now: datetime
) -> set[str]:
    """The owners among `owners` that are gone ('' is the owner of legacy, unowned rows)."""
    live = {p.id: as_utc(p.lease_until) for p in processes}
    dead: set[str] = set()
    for owner in owners:
        if owner == me.id:
            continue
        parsed = parse_owner(owner)
        same_host_gone = parsed is not None and parsed[0] == me.host and not pid_alive(parsed[1])
        if owner not in live or live[owner] < now or same_host_gone:
            dead.add(owner)
    return dead


class LeaseKeeper:
    """This process's leases (one per app): register, renew, release, and take over."""

    def __init__(self, db: Database, identity: ProcessIdentity, lease_s: float) -> None:
        """`db`: the app's; the keeper runs its queries on a worker of its own, so a heartbeat
        never queues behind the runs' queries under load (a late beat would lose leases)."""
        self._db = Database(db.engine)
        self.identity = identity
        self.lease_s = lease_s

    @property
    def me(self) -> str:
        return self.identity.id

    @property
    def beat_interval_s(self) -> float:
        """Three heartbeats per lease: one late beat never loses a run."""
        return self.lease_s / 3

    def until(self) -> datetime:
        return lease_queries.lease_for(utcnow(), self.lease_s)

    async def register(self) -> None:
        row = BotProcess(
            id=self.me, host=self.identity.host, pid=self.identity.pid, lease_until=self.until()
        )
        await self._db.run(lease_queries.register_process, row)

    async def renew(self, run_ids: Sequence[str]) -> list[lease_queries.RunLease]:
        return await self._db.run(lease_queries.beat, self.me, self.until(), list(run_ids))

    async def release(self) -> None:
        await self._db.run(lease_queries.release, self.me, utcnow())

    async def close(self) -> None:
        await asyncio.to_thread(self._db.close)

    async def forget_long_gone(self, older_than_s: float = 86400.0) -> None:
        """Drop the rows of processes gone for a day (a crash leaves its row behind)."""
        before = utcnow() - timedelta(seconds=older_than_s)
        await self._db.run(lease_queries.prune_processes, before)

    async def dead_owners(self) -> set[str]:
        owners = await self._db.run(lease_queries.foreign_owners, self.me)
        if not owners:
            return set()
        processes = await self._db.run(lease_queries.processes)
        return gone(owners, processes, self.identity, utcnow())

    async def adoptable(self, dead: set[str]) -> list[tuple[Run, Conversation]]:
        return await self._db.run(lease_queries.adoptable_runs, self.me, utcnow(), dead)

    async def claim(self, run: Run, dead: set[str]) -> bool:
        return await self._db.run(
            lease_queries.claim_run,
            run.id,
            self.me,
            seen_owner=run.owner,
            now=utcnow(),
            until=self.until(),
            dead=dead,
        )

    async def claim_inbox(self, dead: set[str]) -> list[InboxEvent]:
        return await self._db.run(lease_queries.claim_inbox, self.me, dead)
