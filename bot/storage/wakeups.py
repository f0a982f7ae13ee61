"""Wake-ups between processes: PostgreSQL `LISTEN/NOTIFY`, or a loopback on SQLite.

A wake-up only says "look again" (a decision, a reply, a stop for run X; a process let its
runs go): the database row is the truth, and a slow poll (`bot.runs.leases`) catches any
wake-up lost while a connection was down. Every process listens on one channel and keeps
what concerns its own runs. The listening connection is psycopg's async one, outside the
SQLAlchemy pool; it reconnects with a capped backoff (`bot.storage.pg_wakeups`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Literal, Protocol

CHANNEL = "chatops_wakeup"
WakeKind = Literal["approval", "mail", "stop", "released"]


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


class Wakeups(Protocol):
    """Sends wake-ups and hands those of every process to one handler."""

    def start(self, handler: Handler) -> None: ...

    async def send(self, wakeup: Wakeup) -> None: ...

    async def close(self) -> None: ...


def wakeups_for(database_url: str) -> Wakeups:
    """`LISTEN/NOTIFY` on PostgreSQL (psycopg imported only then), else the loopback."""
    if database_url.startswith("postgresql"):
        from bot.storage.pg_wakeups import PostgresWakeups

        return PostgresWakeups(database_url)
    return LoopbackWakeups()
