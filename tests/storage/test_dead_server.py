"""A PostgreSQL server that does not answer (a failover dropping packets, a hung host): the
engine's connections give up in seconds instead of waiting on libpq's defaults (no connect
timeout at all; a vanished peer noticed after the kernel's ~15 min), and a `DATABASE_URL`
that sets its own values keeps them."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from bot.storage.database import LIBPQ_DEFAULTS, Database, create_db_engine, libpq_defaults
from bot.storage.pg_wakeups import PostgresWakeups
from bot.storage.wakeups import Wakeup


@asynccontextmanager
async def silent_server() -> AsyncIterator[int]:
    """A port that accepts connections and never says a word (nor closes them)."""
    held: list[asyncio.StreamWriter] = []

    async def accept(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        for writer in held:  # a connect still waiting is released, whatever the outcome
            writer.transport.abort()
        await server.wait_closed()


async def test_a_server_that_never_answers_fails_the_call_instead_of_hanging() -> None:
    async with silent_server() as port:
        db = Database(create_db_engine(f"postgresql+psycopg://bot@127.0.0.1:{port}/chatops"))
        try:
            with pytest.raises(OperationalError, match="timeout"):
                # the bound is the test's, far above the 10 s connect timeout: libpq's own
                # default waits for ever, so without the engine's bound this never returns
                await asyncio.wait_for(
                    db.run(lambda session: session.execute(text("SELECT 1"))), 60
                )
        finally:
            await asyncio.to_thread(db.close)


def bounds_of(given: dict[str, str]) -> dict[str, str | None]:
    return {key: given.get(key) for key in LIBPQ_DEFAULTS}


BOUNDS = {key: str(value) for key, value in LIBPQ_DEFAULTS.items()}


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
async def test_every_connection_carries_the_bounds(database_url: str) -> None:
    """What libpq was really given on live connections (their non-default parameters): the
    engine's, and the wake-ups' own (outside its pool)."""
    engine = create_db_engine(database_url)
    try:
        with engine.connect() as connection:
            given = connection.connection.dbapi_connection.info.get_parameters()  # type: ignore[union-attr]
    finally:
        engine.dispose()
    assert bounds_of(given) == BOUNDS
    wakeups = PostgresWakeups(database_url)
    try:
        await wakeups.send(Wakeup("released", sender="test"))
        assert wakeups._sender is not None  # noqa: SLF001 - the connection libpq was given
        assert bounds_of(wakeups._sender.info.get_parameters()) == BOUNDS  # noqa: SLF001
    finally:
        await wakeups.close()


def test_the_urls_own_values_win() -> None:
    own = libpq_defaults("postgresql+psycopg://bot@db/chatops?connect_timeout=3&keepalives=0")
    assert "connect_timeout" not in own and "keepalives" not in own
    assert own["tcp_user_timeout"] == LIBPQ_DEFAULTS["tcp_user_timeout"]
    assert libpq_defaults("sqlite:///./chatops.db") == {}
