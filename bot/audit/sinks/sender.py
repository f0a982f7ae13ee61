"""The background sender: ships each sink's outbox rows, oldest first, once.

One task per sink, so a sink that is down delays no other. Each round claims the sink's lease
and its oldest batch (`bot.storage.outbox.claim_batch`), delivers the batch, and deletes it only
if the lease is still this process's (`mark_sent`): two processes never both send one event,
and the one that holds the sink sends in the outbox's order. A failed delivery is retried, the
same batch first, after a back-off that doubles up to `retry_max_s`; meanwhile runs go on
(their events wait in the outbox, written with the rows they report). Shutdown hands the
lease back so another process takes the sink over at once.

An event can go out twice only if this process's lease lapsed while a delivery was in flight
(a delivery longer than the lease, a paused process); `metadata.uid` lets a receiver drop it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from bot.audit.sinks.ocsf import ocsf_event
from bot.audit.sinks.targets import Sink
from bot.errors import AuditSinkError
from bot.storage import outbox
from bot.storage.database import Database

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SenderPacing:
    """How often and how hard the sender tries: `interval_s` between looks at an empty
    outbox; `retry_min_s`..`retry_max_s` the back-off after a failed delivery; `lease_s` how
    long a claim on a sink lasts (longer than one delivery may take)."""

    batch: int = 100
    interval_s: float = 1.0
    retry_min_s: float = 1.0
    retry_max_s: float = 60.0
    lease_s: float = 60.0


class SinkSender:
    """Owned by the runtime: `start()` after the schema is migrated, `await close()` at exit."""

    def __init__(
        self, db: Database, sinks: Sequence[Sink], *, holder: str, pacing: SenderPacing
    ) -> None:
        """`holder`: this process's id in the sinks' leases; `sinks`: each with its own task."""
        self._db = db
        self._sinks = list(sinks)
        self._holder = holder
        self._pacing = pacing
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def sink_names(self) -> tuple[str, ...]:
        return tuple(sink.name for sink in self._sinks)

    def start(self) -> None:
        for sink in self._sinks:
            self._tasks.append(asyncio.create_task(self._run(sink), name=f"audit-sink-{sink.name}"))

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
        for sink in self._sinks:
            try:
                await self._db.run(outbox.release_lease, sink.name, self._holder)
            except Exception as exc:  # noqa: BLE001 - shutdown goes on; the lease lapses anyway
                log.warning("audit sink %s: lease not handed back: %s", sink.name, exc)

    async def send_once(self, sink: Sink) -> int:
        """One round for one sink: how many events it took (0: none waiting, or another
        process sends for it). Raises `AuditSinkError` if the sink did not take the batch."""
        rows = await self._db.run(
            outbox.claim_batch, sink.name, self._holder,
            lease_s=self._pacing.lease_s, limit=self._pacing.batch,
        )  # fmt: skip
        if not rows:
            return 0
        ids = [row.id or 0 for row in rows]
        try:
            await sink.deliver([ocsf_event(row) for row in rows])
        except AuditSinkError as exc:
            await self._db.run(outbox.note_failure, ids, str(exc))
            raise
        kept = await self._db.run(
            outbox.mark_sent, sink.name, self._holder, ids, lease_s=self._pacing.lease_s
        )
        if not kept:
            log.warning(
                "audit sink %s: lease lapsed during a delivery of %d events; they may go out "
                "again (same metadata.uid)", sink.name, len(ids),
            )  # fmt: skip
            return 0
        return len(ids)

    async def _run(self, sink: Sink) -> None:
        delay = self._pacing.retry_min_s
        while True:
            try:
                sent = await self.send_once(sink)
            except AuditSinkError as exc:
                log.warning("audit sink %s: %s; retrying in %.1f s", sink.name, exc, delay)
            except Exception:  # noqa: BLE001 - the database hiccuped: the rows wait, try later
                log.exception("audit sink %s: outbox unreadable; trying again", sink.name)
            else:
                delay = self._pacing.retry_min_s
                if sent < self._pacing.batch:  # caught up (or another process sends): poll later
                    await asyncio.sleep(self._pacing.interval_s)
                continue
            # one back-off for a refused delivery and a database error (a dropped connection is
            # usually back within a second)
            await asyncio.sleep(delay)  # the back-off, not synchronisation
            delay = min(delay * 2, self._pacing.retry_max_s)
