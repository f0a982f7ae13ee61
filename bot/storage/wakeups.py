"""Wake-ups between processes: PostgreSQL `LISTEN/NOTIFY`, or a loopback on SQLite.

A wake-up only says "look again" (a decision, a reply, a stop for run X; a process let its
runs go): the database row is the truth, and a slow poll (`bot.runs.leases`) catches any
wake-up lost while a connection was down. Every process listens on one channel and keeps
what concerns its own runs. The listening connection is psycopg's async one, outside the
SQLAlchemy pool; it reconnects with a capped backoff.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Literal

import psycopg
from sqlalchemy.engine import make_url

log = logging.getLogger(__name__)

CHANNEL = "chatops_wakeup"
WakeKind = Literal["approval", "mail", "stop", "released"]
RECONNECT_MAX_S = 5.0


@dataclass(frozen=True)
class Wakeup:
    kind: WakeKind
    run_id: str = ""
    approval_id: str = ""
    sender: str = ""

    def encode(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def decode(cls, payload: str) -> Wakeup | None:
        try:
            data = json.loads(payload)
            return cls(**{k: str(v) for k, v in data.items() if k in cls.__dataclass_fields__})
        except (ValueError, TypeError):
            return None


Handler = Callable[[Wakeup], None]


class LoopbackWakeups:
    """One process (SQLite): a wake-up is handled right here, as if it came back."""

    def __init__(self) -> None:
        self._handler: Handler | None = None

    def start(self, handler: Handler) -> None:
        self._handler = handler

    async def send(self, wakeup: Wakeup) -> None:
        if self._handler is not None:
            self._handler(wakeup)

    async def close(self) -> None:
        self._handler = None


class PostgresWakeups:
    """`LISTEN` on one connection, `NOTIFY` on another (each psycopg async, autocommit)."""

    def __init__(self, database_url: str) -> None:
        url = make_url(database_url).set(drivername="postgresql")
        self._conninfo = url.render_as_string(hide_password=False)
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
                        self._conninfo, autocommit=True
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
                    self._conninfo, autocommit=True
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


Wakeups = LoopbackWakeups | PostgresWakeups


def wakeups_for(database_url: str) -> Wakeups:
    if database_url.startswith("postgresql"):
        return PostgresWakeups(database_url)
    return LoopbackWakeups()
