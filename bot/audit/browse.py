"""The call log as the web console browses it: the audit's own queries and renderers, off the
event loop. Filters are an `AuditQuery`, as for `chatops audit`; a download is the same CSV
(or the same entries as JSON), streamed from a worker thread so a wide window never sits in
memory. The console gets this as a port (`bot.surfaces.console.ports.CallLog`).
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import AsyncIterator, Callable, Iterator

from bot.audit.render import csv_chunks, json_chunks
from bot.audit.report import iter_calls, recent_calls
from bot.chat.audit_report import AuditQuery, CallEntry
from bot.storage.database import Database

_DONE = object()
PUT_WAIT_S = 0.1  # how often a producer held up by a slow reader checks whether it left


class CallLogBrowser:
    """Lists and exports calls of one database."""

    def __init__(self, db: Database, *, depth: int = 4) -> None:
        """`db`: the app's database; its reads run in threads of their own on its engine (an
        export streams for as long as the reader reads), never through its queue."""
        self._engine = db.engine
        self._depth = depth

    async def recent(
        self, query: AuditQuery, *, limit: int, before_id: int | None = None
    ) -> list[CallEntry]:
        return await asyncio.to_thread(
            recent_calls, self._engine, query, limit=limit, before_id=before_id
        )

    def export(self, query: AuditQuery, fmt: str) -> AsyncIterator[str]:
        """Every call of the window as CSV (`chatops audit --format csv`'s rows) or JSON."""
        render = csv_chunks if fmt == "csv" else json_chunks
        return _in_thread(lambda: render(iter_calls(self._engine, query)), self._depth)


async def _in_thread(make: Callable[[], Iterator[str]], depth: int) -> AsyncIterator[str]:
    """The chunks of a blocking generator, produced in a worker thread at most `depth` ahead of
    the reader; a reader that stops (the browser left) stops the producer too."""
    chunks: queue.Queue[object] = queue.Queue(depth)
    stop = threading.Event()

    def put(value: object) -> bool:
        while not stop.is_set():
            try:
                chunks.put(value, timeout=PUT_WAIT_S)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for chunk in make():
                if not put(chunk):
                    return
        except BaseException as exc:  # noqa: BLE001 - handed to the reader, raised there
            put(exc)
            return
        put(_DONE)

    loop = asyncio.get_running_loop()
    producer = loop.run_in_executor(None, produce)
    try:
        while True:
            value = await loop.run_in_executor(None, chunks.get)
            if value is _DONE:
                return
            if isinstance(value, BaseException):
                raise value
            assert isinstance(value, str)
            yield value
    finally:
        stop.set()
        await producer
        # a read still waiting (its reader was cancelled during it) must not wait forever; a
        # full queue means nothing waits
        with contextlib.suppress(queue.Full):
            chunks.put_nowait(_DONE)
