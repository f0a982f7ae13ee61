"""The inbox: what is acknowledged is kept. Inbound events are stored before their 200.

A surface hands a verified, parsed message (a click's decision, a feedback click) to
`Inbox.accept_*`, which returns once the event is committed: the `processed_event` dedupe row
and an `inbox_event` row in one transaction (its payload: `bot.inbox.records`). Only then does
the surface answer the platform, so a crash right after the acknowledgement loses nothing:
start-up (`bot.runs.recovery`) hands the rows left behind back to the workers here. Writes of
events arriving together share one transaction (group commit), so a burst of acknowledgements
costs a few commits, not one each.

Messages are processed on a few lane workers, each thread always on the same lane and in
arrival order, so a reply is never processed before the mention that opened its thread;
ratings go through the lanes too, one person's in arrival order (a changed mind wins);
decisions each on a task of their own (no order needed, and one waiting for its card edit
must not hold up the rest).
Workers wait for a pause in arrivals (at most `hold_max_s`) before processing, so a burst's
acknowledgements do not queue behind the runs it starts. A message's row is deleted in the
same transaction that stores it as a conversation message (`RunManager.dispatch`); a
decision's row once the broker has applied it (deciding twice changes nothing).
"""

from __future__ import annotations

import asyncio
import logging
import time
import zlib
from collections.abc import Awaitable, Callable
from typing import Any

from bot.chat.controls import FeedbackClick
from bot.chat.decisions import DecisionRecord, DecisionResult
from bot.chat.threads import InboundMessage
from bot.clock import utcnow
from bot.inbox.records import InboxRecord, payload_of, record_from
from bot.storage import queries as queries
from bot.storage.database import Database, through_outage
from bot.storage.inbox import NewInboxEvent
from bot.storage.models import InboxEvent

log = logging.getLogger(__name__)

QUIET_S = 0.02  # nothing accepted for this long: the burst is over, process what it brought
HOLD_MAX_S = 0.25  # under a steady flood no event waits longer than this to be processed


MessageHandler = Callable[[InboundMessage, int], Awaitable[Any]]
DecisionHandler = Callable[[DecisionRecord], Awaitable[DecisionResult]]
FeedbackHandler = Callable[[FeedbackClick], Awaitable[Any]]


class Inbox:
    """Persist-before-ack for every surface; one per app (see the module docstring)."""

    def __init__(
        self,
        db: Database,
        *,
        dispatch: MessageHandler,
        decide: DecisionHandler,
        feedback: FeedbackHandler | None = None,
        ready: Callable[[], Awaitable[None]] | None = None,
        lanes: int = 16,
        owner: str | None = None,
        claim_orphans: Callable[[set[str]], Awaitable[list[InboxEvent]]] | None = None,
    ) -> None:
        """`dispatch(message, inbox_id)`: process a message and delete its row with it;
        `decide(record)`: apply a decision; `feedback(click)`: record a rating (none: feedback
        clicks are dropped once stored); `ready()`: returns once start-up recovery has
        requeued what an earlier process left (nothing is processed before); `owner`: this
        process (its rows are its own to process); `claim_orphans(gone owners)`: take over the
        rows of gone processes (`LeaseKeeper.claim_inbox`)."""
        self._db = db
        self._owner = owner
        self._claim_orphans = claim_orphans
        self._dispatch: dict[str, MessageHandler] = {}
        self._default_dispatch = dispatch
        self._decide = decide
        self._feedback = feedback
        self._ready = ready
        self._lane_count = lanes
        self._lanes: list[asyncio.PriorityQueue[tuple[int, InboxRecord]]] = []
        self._workers: list[asyncio.Task[None]] = []
        self._deciding: set[asyncio.Task[None]] = set()
        self._queued: set[int] = set()
        self._results: dict[int, asyncio.Future[DecisionResult]] = {}
        self._batch: list[
            tuple[NewInboxEvent, str, asyncio.Future[int | None], asyncio.Future[Any] | None]
        ] = []
        self._flusher: asyncio.Task[None] | None = None
        self._last_accept = 0.0

    def route_messages(self, platform: str, handler: MessageHandler) -> None:
        """Messages of `platform` go to `handler` (it deletes the row, e.g. by dispatching)."""
        self._dispatch[platform] = handler

    # --- accepting (before the 200) -----------------------------------------------------------

    async def accept_message(self, message: InboundMessage) -> bool:
        """Store the message; True when it is new (False: a retry or re-push, dropped)."""
        row = NewInboxEvent(
            platform=message.thread.platform,
            kind="message",
            payload=payload_of(message),
            received_at=message.received_at,
        )
        return await self._write(row, f"{message.thread.platform}:{message.event_id}") is not None

    async def accept_decision(self, record: DecisionRecord) -> asyncio.Future[DecisionResult]:
        """Store the decision; returns a future of what the broker made of it (once applied)."""
        row = NewInboxEvent(
            platform=record.platform,
            kind="decision",
            payload=payload_of(record),
            received_at=utcnow(),
        )
        result: asyncio.Future[DecisionResult] = asyncio.get_running_loop().create_future()
        await self._write(row, "", result)
        return result

    async def accept_feedback(self, click: FeedbackClick) -> None:
        """Store a thumbs up or down; it is applied after (`feedback`)."""
        row = NewInboxEvent(
            platform=click.platform,
            kind="feedback",
            payload=payload_of(click),
            received_at=utcnow(),
        )
        await self._write(row, "")

    async def _write(
        self,
        row: NewInboxEvent,
        dedupe_key: str,
        result: asyncio.Future[DecisionResult] | None = None,
    ) -> int | None:
        """Join the next group commit; the row's id, or None for a duplicate. `result` (a
        decision's) is resolved when the decision has been applied."""
        future: asyncio.Future[int | None] = asyncio.get_running_loop().create_future()
        row.owner = self._owner
        self._batch.append((row, dedupe_key, future, result))
        self._last_accept = time.monotonic()
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush(), name="inbox writer")
        return await asyncio.shield(future)

    async def _flush(self) -> None:
        while self._batch:
            batch, self._batch = self._batch, []
            entries = [(row, key) for row, key, _, _ in batch]
            try:
                ids = await self._db.run_first(queries.add_inbox_events, entries)
            except Exception as exc:  # noqa: BLE001 - each waiter gets the error (no 200 then)
                for _, _, future, _ in batch:
                    if not future.done():
                        future.set_exception(exc)
                continue
            now = time.monotonic()
            for (row, _, future, result), inbox_id in zip(batch, ids, strict=True):
                if inbox_id is not None:  # stored: processed whatever its waiter does now
                    if result is not None:
                        self._results[inbox_id] = result
                    self._submit(record_from(inbox_id, row.kind, row.payload, accepted=now))
                if not future.done():
                    future.set_result(inbox_id)

    # --- processing ---------------------------------------------------------------------------

    async def adopt(self, dead: set[str]) -> int:
        """Take over the rows gone processes acknowledged but never processed, and hand them
        to the workers (how many)."""
        if self._claim_orphans is None:
            return 0
        rows = await self._claim_orphans(dead)
        count = 0
        for row in rows:
            if row.id is not None and row.id not in self._queued:
                self._submit(record_from(row.id, row.kind, row.payload))
                count += 1
        return count

    def _submit(self, record: InboxRecord) -> None:
        if not self._workers:
            self._start_workers()
        self._queued.add(record.id)
        if record.message is None and record.feedback is None:
            # decisions need no order, and one waiting for its card edit (the platform's rate
            # limit) must not hold up the others: each is applied on a task of its own
            task = asyncio.get_running_loop().create_task(
                self._decide_one(record), name=f"inbox decision {record.id}"
            )
            self._deciding.add(task)
            task.add_done_callback(self._deciding.discard)
            return
        lane = zlib.crc32(record.lane_key.encode()) % len(self._lanes)
        self._lanes[lane].put_nowait((record.id, record))

    async def _decide_one(self, record: InboxRecord) -> None:
        if self._ready is not None:
            await self._ready()
        try:
            await self._process_through_outage(record)
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - the row stays; the next start-up applies it again
            log.exception("inbox: applying decision %s failed", record.id)
        finally:
            self._queued.discard(record.id)

    def _start_workers(self) -> None:
        loop = asyncio.get_running_loop()
        for index in range(self._lane_count):
            lane: asyncio.PriorityQueue[tuple[int, InboxRecord]] = asyncio.PriorityQueue()
            self._lanes.append(lane)
            self._workers.append(loop.create_task(self._work(lane), name=f"inbox lane {index}"))

    async def _work(self, lane: asyncio.PriorityQueue[tuple[int, InboxRecord]]) -> None:
        if self._ready is not None:
            await self._ready()
        while True:
            _, record = await lane.get()
            try:
                await self._after_the_burst(record.accepted)
                await self._process_through_outage(record)
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - one bad event must not stop the lane
                log.exception("inbox: processing event %s failed", record.id)
            finally:
                self._queued.discard(record.id)
                lane.task_done()

    async def _after_the_burst(self, accepted: float) -> None:
        """Acks first: wait for a pause in arrivals, at most `HOLD_MAX_S` after `accepted`."""
        while True:
            now = time.monotonic()
            quiet_for = now - self._last_accept
            if quiet_for >= QUIET_S or now - accepted >= HOLD_MAX_S:
                return
            # pacing, not synchronisation: the acks of a burst go out meanwhile
            await asyncio.sleep(QUIET_S - quiet_for)  # noqa: ASYNC110

    async def _process_through_outage(self, record: InboxRecord) -> None:
        """An acknowledged event is processed even if the database blinks meanwhile (a
        dropped connection, a restart): only a failure that outlasts the outage leaves its
        row for the next start-up. Processing again is safe: a message's row goes in the
        transaction that stores it, and deciding twice changes nothing."""
        await through_outage(lambda: self._process(record), f"inbox event {record.id}")

    async def _process(self, record: InboxRecord) -> None:
        if record.message is not None:
            message = record.message
            handler = self._dispatch.get(message.thread.platform, self._default_dispatch)
            await handler(message, record.id)
            return
        if record.feedback is not None:
            if self._feedback is not None:
                await self._feedback(record.feedback)
            await self.done(record.id)
            return
        assert record.decision is not None
        future = self._results.pop(record.id, None)  # None: requeued, nobody is waiting
        try:
            result = await self._decide(record.decision)
        except Exception as exc:
            if future is not None and not future.done():
                future.set_exception(exc)
            raise
        if future is not None and not future.done():  # the clicker hears at once
            future.set_result(result)
        await self.done(record.id)

    async def done(self, inbox_id: int) -> None:
        """Delete a processed row (handlers that do not dispatch call this themselves)."""
        await self._db.run(queries.delete_inbox_event, inbox_id)

    async def wait_idle(self, timeout: float) -> None:  # noqa: ASYNC109 - like RunManager's
        """Until everything accepted so far has been processed (tests, bench, shutdown)."""
        async with asyncio.timeout(timeout):
            while self._batch or (self._flusher is not None and not self._flusher.done()):
                await asyncio.gather(self._flusher, return_exceptions=True)
            for lane in self._lanes:
                await lane.join()
            while self._deciding:
                await asyncio.gather(*list(self._deciding), return_exceptions=True)

    async def close(self) -> None:
        tasks = [*self._workers, *self._deciding, *([self._flusher] if self._flusher else [])]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._workers.clear()
        self._lanes.clear()
        self._queued.clear()
