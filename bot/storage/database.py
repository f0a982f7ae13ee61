"""The database: one SQLAlchemy engine per app, the schema migrated at start-up, and a helper that
runs short synchronous SQLModel work off the event loop.

SQLModel is synchronous. The runtime never blocks the loop on it: every store call goes through
`Database.run`, which opens a session on one of the `Database`'s own worker threads (one on
SQLite, a small pool elsewhere; not the loop's default executor), commits, and hands back detached
objects (`expire_on_commit=False`) that stay readable after the session is gone. One `Database`
per app, passed to every component, so they all share that queue.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Concatenate, ParamSpec, TypeVar

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlmodel import Session

from bot.storage import migrate
from bot.storage.db_queue import RankedWorkers
from bot.storage.outbox import OutboxSinks, session_info

P = ParamSpec("P")
T = TypeVar("T")
log = logging.getLogger(__name__)

OUTAGE_RETRY_S = (0.5, 1.0, 2.0, 4.0, 8.0)  # pauses between attempts across an outage


def safe_database_url(url: str) -> str:
    """The URL with any password hidden, for logs and error messages."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - an unparsable URL is still worth naming, minus secrets
        return url.split("@")[-1]


def unreachable(exc: BaseException) -> bool:
    """The database could not be reached (connection refused, dropped, a server restarting):
    the same statement may well succeed a few seconds later."""
    if not isinstance(exc, DBAPIError):
        return False
    return exc.connection_invalidated or isinstance(exc, OperationalError)


async def through_outage(attempt: Callable[[], Awaitable[T]], what: str) -> T:
    """`attempt()`, tried again while the database is unreachable (a restart or a failover
    takes seconds; ~15 s in all), for work that was acknowledged or begun and must not be
    dropped on the first refused connection. `attempt` must be safe to repeat."""
    for delay in (*OUTAGE_RETRY_S, None):
        try:
            return await attempt()
        except Exception as exc:
            if delay is None or not unreachable(exc):
                raise
            log.warning("%s: database unreachable; trying again in %.1f s", what, delay)
        await asyncio.sleep(delay)  # the database's outage, not synchronisation
    raise AssertionError("not reached")  # pragma: no cover - the loop returns or raises


# libpq waits on a dead server for minutes by default: a connect whose packets a failover
# drops has no timeout of its own, and a connection whose peer vanished hangs until the kernel
# gives up (~15 min). These bound both (a beat, a run and an ack would otherwise hang with it):
# 10 s to connect; keepalives after 30 s idle; sent data unacknowledged for 30 s fails.
LIBPQ_DEFAULTS: dict[str, str | int] = {
    "connect_timeout": 10,
    "keepalives": 1,
    "keepalives_idle": 30,
    "keepalives_interval": 10,
    "keepalives_count": 3,
    "tcp_user_timeout": 30_000,
}


def libpq_defaults(url: str) -> dict[str, str | int]:
    """`LIBPQ_DEFAULTS` for a PostgreSQL URL, less what the URL sets itself (its own values
    win: SQLAlchemy would let these override them); nothing for other databases."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "postgresql":
        return {}
    return {key: value for key, value in LIBPQ_DEFAULTS.items() if key not in parsed.query}


def create_db_engine(url: str) -> Engine:
    """An engine for `DATABASE_URL`; SQLite gets WAL and a busy timeout for worker threads,
    PostgreSQL bounded waits on a server that does not answer (`LIBPQ_DEFAULTS`)."""
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})
        if ":memory:" not in url and url not in ("sqlite://", "sqlite:///"):
            event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    return create_engine(
        url, pool_pre_ping=True, pool_size=10, max_overflow=20, connect_args=libpq_defaults(url)
    )


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.execute("PRAGMA synchronous=NORMAL")  # WAL: durable at checkpoints, never corrupt
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def db_error_reason(exc: BaseException) -> str:
    """The first line of what the database driver said (not SQLAlchemy's wrapping)."""
    return str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]


def init_schema(engine: Engine, credentials_key: str | None = None) -> str:
    """Create or migrate the schema (Alembic `upgrade head`); returns the revision.
    `credentials_key`: for the revisions that seal stored tokens (`migrate.upgrade`)."""
    return migrate.upgrade(engine, credentials_key=credentials_key)


def open_database(url: str) -> Engine:
    """`create_db_engine` + `init_schema`: what start-up needs in one call."""
    engine = create_db_engine(url)
    init_schema(engine)
    return engine


class Database:
    """Runs store functions (`fn(session, ...)`) in worker threads, one committed session each.

    SQLite takes one writer at a time and its busy handler sleeps, so on SQLite the calls go
    through one worker thread of their own (queued, never contending); other databases get a
    small pool. The pool is the app's own, so `close()` can wait for calls still in flight
    (a cancelled task does not stop its thread, which may hold locks). Share one `Database`
    per app so every component uses the same queue. `run_first` is the queue's fast lane
    (`bot.storage.db_queue`): for what a person is waiting to see.
    """

    POOL_WORKERS = 8

    def __init__(self, engine: Engine, *, audit_sinks: OutboxSinks | None = None) -> None:
        """`audit_sinks`: the sinks each call-log and approval event is queued for, in the
        transaction of its change (`bot.storage.outbox`); none: nothing is queued."""
        self.engine = engine
        self.audit_sinks = (audit_sinks or OutboxSinks()).names
        self._session_info = session_info(audit_sinks or OutboxSinks())
        workers = 1 if engine.dialect.name == "sqlite" else self.POOL_WORKERS
        self._workers = RankedWorkers(workers, "db")

    def call(
        self, fn: Callable[Concatenate[Session, P], T], *args: P.args, **kwargs: P.kwargs
    ) -> T:
        """Synchronously: open a session, run `fn`, commit, close."""
        with Session(self.engine, expire_on_commit=False, info=self._session_info) as session:
            result = fn(session, *args, **kwargs)
            session.commit()
            return result

    async def run(
        self, fn: Callable[Concatenate[Session, P], T], *args: P.args, **kwargs: P.kwargs
    ) -> T:
        """`call` in a worker thread, so the event loop never waits on the database."""
        job = functools.partial(self.call, fn, *args, **kwargs)
        return await asyncio.wrap_future(self._workers.submit(job))

    async def run_first(
        self, fn: Callable[Concatenate[Session, P], T], *args: P.args, **kwargs: P.kwargs
    ) -> T:
        """`run`, ahead of every call queued by `run`: an acknowledgement, a thread's first
        status, a decision someone clicked; under a burst they do not wait behind other
        runs' later writes."""
        job = functools.partial(self.call, fn, *args, **kwargs)
        return await asyncio.wrap_future(self._workers.submit(job, first=True))

    def close(self) -> None:
        """Wait for the calls in flight, then stop the worker threads."""
        self._workers.shutdown()
