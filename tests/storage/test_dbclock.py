"""`db_now` is compiled once per offset and dialect (SQLAlchemy's statement cache), yet two
offsets never share a compiled statement: the offset is part of the cache key."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import create_engine, event, select
from sqlmodel import Session

from bot.clock import AlignedClock, utcnow
from bot.storage.dbclock import db_now
from bot.storage.leases import read_clock

pytestmark = pytest.mark.both_databases


def test_each_offset_compiles_once_and_keeps_its_own_value(database_url: str) -> None:
    engine = create_engine(database_url)
    compiled: list[str] = []

    @event.listens_for(engine, "before_cursor_execute")
    def record(conn, cursor, statement, params, context, executemany) -> None:  # type: ignore[no-untyped-def]
        compiled.append(str(context.cache_hit))

    try:
        with engine.connect() as connection:
            now = [connection.execute(select(db_now(0))).scalar_one() for _ in range(3)]
            later = [connection.execute(select(db_now(3600))).scalar_one() for _ in range(3)]
    finally:
        engine.dispose()
    for a, b in zip(now, later, strict=True):
        assert timedelta(minutes=59) < b - a < timedelta(minutes=61)
    # compiled on the first use of each offset, taken from the cache after (never "no key")
    assert [entry.rsplit(".", 1)[-1] for entry in compiled] == [
        "CACHE_MISS",
        "CACHE_HIT",
        "CACHE_HIT",
        "CACHE_MISS",
        "CACHE_HIT",
        "CACHE_HIT",
    ]


def test_a_host_clock_is_moved_onto_the_databases(database_url: str) -> None:
    """A host an hour ahead reads the database's time through an `AlignedClock` once it has
    measured its offset (to within the round trip; the database runs on this host)."""
    clock = AlignedClock(local=lambda: utcnow() + timedelta(hours=1))
    assert clock.now() - utcnow() > timedelta(minutes=59)  # before any measurement: its own
    engine = create_engine(database_url)
    try:
        with Session(engine) as session:
            reading = read_clock(session, clock.local)
    finally:
        engine.dispose()
    clock.observe(reading.database, reading.sent, reading.received)
    assert abs(clock.offset + timedelta(hours=1)) < timedelta(seconds=5)
    assert abs(clock.now() - utcnow()) < timedelta(seconds=5)
