"""PostgreSQL wake-ups: `LISTEN` on one psycopg async connection, `NOTIFY` on another.

Its own module so that a process on SQLite never imports psycopg (a tenth of a second of
start-up). Both connections are outside the SQLAlchemy pool, autocommit; the listener
reconnects with a capped backoff, and a lost wake-up is caught by the slow poll.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import psycopg
from sqlalchemy.engine import make_url

from bot.storage.database import libpq_defaults
from bot.storage.wakeups import CHANNEL, Handler, Wakeup

log = logging.getLogger(__name__)

RECONNECT_MAX_S = 5.0


class PostgresWakeups:
    """`LISTEN` on one connection, `NOTIFY` on another (each psycopg async, autocommit)."""

    def __init__(self, database_url: str) -> None:
        url = make_url(database_url).set(drivername="postgresql")
        self._conninfo = url.render_as_string(hide_password=False)
        # bounded as the engine's are: a listener on a dead server would hear nothing, for ever
        self._bounds = libpq_defaults(database_url)
        self._handler: Handler | None = None
        self._listener: asyncio.Task[None] | None = None
        self._sender: psycopg.AsyncConnection | None = None
        self._send_lock = asyncio.Lock()
        self.listening = asyncio.Event()

    def start(self, handler: Handler) -> None:
        self._handler = handler
        self._listener = asyncio.create_task(self._listen(), name="wakeup listener")

    async def send(self, wakeup: Wakeup) -> None:
        """NOTIFY; a failure is logged (the poll delivers what the wake-up would have)."""
        async with self._send_lock:
            try:
                if self._sender is None or self._sender.closed:
                    self._sender = await psycopg.AsyncConnection.connect(
                        self._conninfo, autocommit=True, **self._bounds
                    )
                await self._sender.execute("SELECT pg_notify(%s, %s)", (CHANNEL, wakeup.encode()))
            except (psycopg.Error, OSError) as exc:
                log.warning("wake-up %s not sent (the poll will catch up): %s", wakeup.kind, exc)
                self._sender = None

    async def _listen(self) -> None:
        delay = 0.1
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(
                    self._conninfo, autocommit=True, **self._bounds
                ) as conn:
                    await conn.execute(f"LISTEN {CHANNEL}")
                    self.listening.set()
                    delay = 0.1
                    async for note in conn.notifies():
                        wakeup = Wakeup.decode(note.payload)
                        if wakeup is not None and self._handler is not None:
                            self._handler(wakeup)
            except asyncio.CancelledError:
                raise
            except (psycopg.Error, OSError) as exc:
                self.listening.clear()
                log.warning("wake-up listener lost its connection (retrying): %s", exc)
            await asyncio.sleep(delay)
            delay = min(delay * 2, RECONNECT_MAX_S)

    async def close(self) -> None:
        if self._listener is not None:
            self._listener.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._listener
        if self._sender is not None:
            with contextlib.suppress(Exception):
                await self._sender.close()
