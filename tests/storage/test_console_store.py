"""The console's store: items keep their place, every change is the next event, a duplicate
changes nothing, and concurrent writers never let a reader skip an event (SQLite and
PostgreSQL; on PostgreSQL the writers are parallel sessions, as several processes would be)."""

from __future__ import annotations

import threading

import pytest

from bot.storage.console import (
    ConsoleStore,
    current_seq,
    items_since,
    list_threads,
    save_item,
    thread_items,
)
from bot.storage.database import Database

pytestmark = pytest.mark.both_databases  # concurrent writers: the store orders events per dialect


def test_an_item_keeps_its_place_and_each_change_is_the_next_event(db: Database) -> None:
    first, thread = db.call(save_item, "m-1", "t1", "message", {"text": "restart api"},
                            title="restart\n api  please")  # fmt: skip
    assert (first.seq, first.position) == (1, 1)
    assert thread.title == "restart api please" and thread.seq == 1
    status, thread = db.call(save_item, "s-1", "t1", "status", {"n": 1}, state="running")
    assert (status.seq, thread.state) == (2, "running")
    card, thread = db.call(save_item, "a-1", "t1", "approval", {"approval_id": "A"},
                           state="pending")  # fmt: skip
    assert thread.pending == 1
    changed, thread = db.call(save_item, "s-1", "t1", "status", {"n": 2}, state="done")
    assert (changed.seq, changed.position) == (4, 2) and thread.state == "done"
    decided, thread = db.call(save_item, "a-1", "t1", "approval", {"approval_id": "A"},
                              state="approved")  # fmt: skip
    assert thread.pending == 0 and thread.title == "restart api please"

    assert [i.id for i in db.call(thread_items, "t1", 100)] == ["m-1", "s-1", "a-1"]
    since = db.call(items_since, 2, 100)
    assert [(i.id, i.seq) for i in since] == [("s-1", 4), ("a-1", 5)]  # latest states, once
    assert since[0].data == {"n": 2}
    assert db.call(current_seq) == 5


def test_a_duplicate_create_writes_nothing_and_takes_no_number(db: Database) -> None:
    db.call(save_item, "m-1", "t1", "message", {"text": "hi"})
    assert db.call(save_item, "m-1", "t1", "message", {"text": "changed"}, create_only=True) is None
    assert db.call(current_seq) == 1
    [item] = db.call(thread_items, "t1", 10)
    assert item.data == {"text": "hi"}


def test_threads_newest_first_without_hidden_roots(db: Database) -> None:
    for root in ("old", "approvals", "new"):
        db.call(save_item, f"m-{root}", root, "message", {}, title=root)
    assert [t.root for t in db.call(list_threads, 10, ("approvals",))] == ["new", "old"]
    db.call(save_item, "m-old", "old", "message", {"x": 1})
    assert [t.root for t in db.call(list_threads, 10, ("approvals",))] == ["old", "new"]


def test_a_reader_following_concurrent_writers_misses_no_event(db: Database) -> None:
    """Writers in parallel sessions; a reader that only ever asks "what came after the last
    event I saw" must end up with every item in its final state. If numbers were given out
    before commit order, a later number committed first would move the reader past an
    earlier one still in flight, and that item would be lost to it."""
    writers, per_writer = 6, 15
    seen: dict[str, int] = {}
    done = threading.Event()
    failures: list[BaseException] = []

    def write(n: int) -> None:
        try:
            for i in range(per_writer):
                db.call(save_item, f"i-{n}-{i}", f"t{n}", "notice", {"i": i})
                db.call(save_item, f"i-{n}-{i}", f"t{n}", "notice", {"i": i, "edited": True})
        except BaseException as exc:  # noqa: BLE001 - reported by the test thread
            failures.append(exc)

    def read() -> None:
        cursor = 0
        while True:
            finished = done.is_set()
            for item in db.call(items_since, cursor, 50):
                assert item.seq > cursor
                seen[item.id] = item.seq
                cursor = item.seq
            if finished:
                return

    reader = threading.Thread(target=read)
    reader.start()
    threads = [threading.Thread(target=write, args=(n,)) for n in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    done.set()
    reader.join()
    assert not failures
    assert len(seen) == writers * per_writer
    final = {i.id: i.seq for i in db.call(items_since, 0, 10_000)}
    assert seen == final  # the reader holds every item at its latest event
    assert db.call(current_seq) == 2 * writers * per_writer  # no number lost or given twice


async def test_the_port_runs_the_queries_off_the_loop(db: Database) -> None:
    store = ConsoleStore(db)
    saved = await store.save("m-1", "t1", "message", {"text": "hi"}, title="hi")
    assert saved is not None
    assert await store.cursor() == 1
    assert [i.id for i in await store.since(0)] == ["m-1"]
    assert (await store.thread("t1")).title == "hi"  # type: ignore[union-attr]
    assert await store.thread("nope") is None
    assert await store.run_root("no-such-run") is None
    assert store.shared == (db.engine.dialect.name != "sqlite")
