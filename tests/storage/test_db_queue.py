"""The database queue's fast lane: `Database.run_first` overtakes calls queued by `run`."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
from sqlmodel import Session, text

from bot.storage.database import Database, open_database
from bot.storage.db_queue import RankedWorkers


def test_first_jobs_are_taken_before_queued_ones_in_arrival_order() -> None:
    workers = RankedWorkers(1, "test")
    gate = threading.Event()
    order: list[str] = []
    blocker = workers.submit(gate.wait)  # the one worker is busy: the rest queue
    futures = [
        workers.submit(lambda: order.append("a")),
        workers.submit(lambda: order.append("b")),
        workers.submit(lambda: order.append("first-1"), first=True),
        workers.submit(lambda: order.append("c")),
        workers.submit(lambda: order.append("first-2"), first=True),
    ]
    gate.set()
    for future in [blocker, *futures]:
        future.result(timeout=10)
    workers.shutdown()
    assert order == ["first-1", "first-2", "a", "b", "c"]


def test_a_cancelled_job_is_skipped_and_errors_reach_the_caller() -> None:
    workers = RankedWorkers(1, "test")
    gate = threading.Event()
    ran: list[str] = []
    workers.submit(gate.wait)
    cancelled = workers.submit(lambda: ran.append("cancelled"))
    assert cancelled.cancel()
    failing = workers.submit(lambda: 1 / 0)
    gate.set()
    with pytest.raises(ZeroDivisionError):
        failing.result(timeout=10)
    workers.shutdown()
    assert ran == []


def test_shutdown_finishes_what_is_queued_then_refuses_more() -> None:
    workers = RankedWorkers(2, "test")
    gate = threading.Event()
    done: list[int] = []
    workers.submit(gate.wait)
    for n in range(5):
        workers.submit(lambda n=n: done.append(n))
    gate.set()
    workers.shutdown()
    assert sorted(done) == [0, 1, 2, 3, 4]
    with pytest.raises(RuntimeError, match="shut down"):
        workers.submit(lambda: None)
    workers.shutdown()  # again: nothing happens


async def test_run_first_overtakes_a_queue_of_store_calls(tmp_path: Path) -> None:
    """SQLite has one worker thread: a burst of store calls queues, and an acknowledgement's
    write (`run_first`) goes ahead of them."""
    db = Database(open_database(f"sqlite:///{tmp_path / 'q.db'}"))
    gate = threading.Event()
    order: list[str] = []

    def hold(session: Session) -> None:
        gate.wait(10)

    def note(session: Session, name: str) -> None:
        session.exec(text("SELECT 1"))  # type: ignore[call-overload]
        order.append(name)

    held = asyncio.ensure_future(db.run(hold))
    await asyncio.sleep(0)  # queued first
    later = [asyncio.ensure_future(db.run(note, f"later-{n}")) for n in range(20)]
    first = asyncio.ensure_future(db.run_first(note, "ack"))
    await asyncio.sleep(0)  # each task has submitted its call: all queue behind the held one
    gate.set()
    await asyncio.gather(held, first, *later)
    db.close()
    assert order[0] == "ack"
    assert order[1:] == [f"later-{n}" for n in range(20)]
