"""`GET /console/api/events`: the console's Server-Sent Events, resumable without gaps or repeats.

Every event carries `id:`, the console store's event number (`seq`), which the database hands
out in commit order in every process, so it survives a reload, a reconnect, a restart and a
move to another process. A browser that sends `Last-Event-ID: N` first gets every item changed
after N (each once, in its latest state, in event order), then the live stream. Run events
(steps, the answer as it streams) are live only; they carry the id of the last item before them,
and a reconnecting browser gets the answers streaming now as `reset` frames with their text so
far, so it shows neither a gap nor a repeat.

Live items come from this process's own broadcasts; one is sent at once when it is the very
next event, otherwise (an event of another process came between, or broadcasts crossed) the
store is asked for everything after the last one sent. With a shared store (PostgreSQL, several
processes) it is also asked every `poll_s`, the safety net for other processes' events.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time

from aiohttp import web

from bot.surfaces.console.ports import ItemStore
from bot.surfaces.console.surface import ConsoleSurface, Outgoing, item_event

log = logging.getLogger(__name__)

HEARTBEAT_S = 15.0
REPLAY_BATCH = 500


class EventStream:
    """One browser's event stream: what it has been sent, up to event `cursor`."""

    def __init__(
        self, response: web.StreamResponse, store: ItemStore, *, cursor: int, poll_s: float
    ) -> None:
        self.response = response
        self.store = store
        self.cursor = cursor
        self.poll_s = poll_s if store.shared else HEARTBEAT_S
        self._last_write = time.monotonic()

    async def send(self, outgoing: Outgoing) -> None:
        if outgoing.seq is not None:
            self.cursor = outgoing.seq
        payload = json.dumps(outgoing.data)
        frame = f"id: {self.cursor}\nevent: {outgoing.event}\ndata: {payload}\n\n"
        await self.response.write(frame.encode())
        self._last_write = time.monotonic()

    async def catch_up(self) -> None:
        """Every item changed after `cursor`, from the store, in event order."""
        while True:
            items = await self.store.since(self.cursor, REPLAY_BATCH)
            for item in items:
                await self.send(item_event(item))
            if len(items) < REPLAY_BATCH:
                return

    async def deliver(self, outgoing: Outgoing) -> None:
        """A live broadcast: sent as is when it is the next event, else caught up from the
        store (which holds it, or a later state of it); old news is dropped."""
        if outgoing.seq is None or outgoing.seq == self.cursor + 1:
            await self.send(outgoing)
        elif outgoing.seq > self.cursor:
            await self.catch_up()

    async def idle(self) -> None:
        """Nothing came for `poll_s`: look for other processes' events; keep the line open."""
        if self.store.shared:
            await self.catch_up()
        if time.monotonic() - self._last_write >= HEARTBEAT_S:
            await self.response.write(b": ping\n\n")
            self._last_write = time.monotonic()


def last_event_id(request: web.Request) -> int | None:
    """The `Last-Event-ID` a reconnecting browser sends (None: absent or not an event id)."""
    value = request.headers.get("Last-Event-ID", "").strip()
    if not value.isdigit() or len(value) > 18:
        return None
    return int(value)


async def serve_events(
    request: web.Request, surface: ConsoleSurface, *, poll_s: float = 2.0
) -> web.StreamResponse:
    """The stream: the answers streaming now, the items after `Last-Event-ID` (none without
    one: the page loads a thread first and sends its cursor), then each change as it happens.
    An id beyond the store's latest (a database replaced under the browser) gets a `resync`
    event: the page reloads what it shows."""
    response = web.StreamResponse(
        headers={
            "Content-Type": "text/event-stream",
            "Cache-Control": "no-store",
            "X-Accel-Buffering": "no",
        }
    )
    await response.prepare(request)
    queue, live = surface.subscribe()
    try:
        latest = await surface.store.cursor()
        resume = last_event_id(request)
        stream = EventStream(
            response, surface.store, cursor=latest if resume is None else min(resume, latest),
            poll_s=poll_s,
        )  # fmt: skip
        if resume is not None and resume > latest:
            await stream.send(Outgoing("resync", {"cursor": latest}))
        for outgoing in live:
            await stream.send(outgoing)
        await stream.catch_up()
        while True:
            try:
                outgoing = await asyncio.wait_for(queue.get(), stream.poll_s)
            except TimeoutError:
                await stream.idle()
                continue
            if outgoing is None:
                break
            await stream.deliver(outgoing)
    except ConnectionResetError:
        log.debug("console: a browser closed its event stream")
    finally:
        surface.unsubscribe(queue)
    return response
