"""A mention that opens a new thread stores the thread, its message and its run in one
transaction (issue 29: one commit fewer per new thread on the database's busiest path), and
still keeps every rule of the usual way: CHATOPS_MAX_ACTIVE_RUNS counts runs being stored,
a person past their cap is refused with nothing started, a known thread goes the usual way."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import event

from bot.storage.models import Conversation, Message
from tests.fakes.openai_server import answer
from tests.runs.conftest import Harness

pytestmark = pytest.mark.both_databases  # one transaction on each; the cap's lock on PostgreSQL


def writes_by_transaction(harness: Harness) -> list[list[str]]:
    """The INSERTs, UPDATEs and DELETEs of each transaction from now on (table, statement)."""
    done: list[list[str]] = [[]]

    def statement(_conn: object, _cursor: object, sql: str, *_rest: object) -> None:
        words = sql.split()
        if words and words[0].upper() in ("INSERT", "UPDATE", "DELETE"):
            table = words[2] if words[0].upper() in ("INSERT", "DELETE") else words[1]
            done[-1].append(f"{words[0].upper()} {table}")

    event.listen(harness.engine, "before_cursor_execute", statement)
    event.listen(harness.engine, "commit", lambda _conn: done.append([]))
    return done


async def test_a_new_threads_conversation_message_and_run_are_one_commit(
    harness: Harness,
) -> None:
    harness.fake.hold()  # the run waits on the model: only the dispatch's commits are counted
    app = await harness.app()
    writes = writes_by_transaction(harness)
    started = await app.manager.dispatch(harness.message("check api", root="7.1"))
    assert started.kind == "started"
    opened = [w for w in writes if any(x.startswith("INSERT conversation") for x in w)]
    assert opened == [
        ["INSERT processed_event", "INSERT conversation", "INSERT message", "INSERT run"]
    ]
    [conv] = harness.rows(Conversation, root="7.1")
    [run] = harness.runs(conversation_id=conv.id)
    assert run.id == started.run_id and run.owner == app.manager.leases.me
    assert run.lease_until is not None  # its lease starts in the same statement
    [asked] = harness.rows(Message, conversation_id=conv.id)
    assert asked.text == "check api" and asked.created_at <= run.started_at

    # a mention in the known thread goes the usual way
    again = await app.manager.dispatch(harness.message("and web?", root="7.1"))
    assert again.kind == "interrupt" and again.run_id == run.id
    harness.fake.script(answer("done"), answer("Done."))
    harness.fake.release()
    await app.manager.wait_idle(10)


async def test_runs_being_opened_count_against_the_process_limit(harness: Harness) -> None:
    """Mentions opening threads at the same moment never start more runs than
    CHATOPS_MAX_ACTIVE_RUNS: the seat is held while the run is stored."""
    harness.fake.hold()
    app = await harness.app(chatops_max_active_runs=2)
    outcomes = await asyncio.gather(
        *(app.manager.dispatch(harness.message(f"check {n}", root=f"8.{n}")) for n in range(5))
    )
    kinds = sorted(o.kind for o in outcomes)
    assert kinds.count("started") == 2 and app.manager.active_count == 2
    assert len(harness.runs()) == 2
    harness.fake.script(*(answer("ok") for _ in range(4)))
    harness.fake.release()
    await app.manager.wait_idle(10)


async def test_a_new_thread_past_the_persons_cap_starts_nothing(harness: Harness) -> None:
    harness.fake.hold()
    app = await harness.app(chatops_max_active_runs_per_user=1)
    first = await app.manager.dispatch(harness.message("check api", root="9.1"))
    assert first.kind == "started"
    second = await app.manager.dispatch(harness.message("check web", root="9.2"))
    assert second.kind == "limited"
    assert [r.id for r in harness.runs()] == [first.run_id]
    [conv] = harness.rows(Conversation, root="9.2")  # the thread is known; nothing else of it
    assert harness.rows(Message, conversation_id=conv.id) == []
    harness.fake.script(answer("ok"), answer("Ok."))
    harness.fake.release()
    await app.manager.wait_idle(10)


def selects_from(harness: Harness, table: str) -> list[str]:
    """The SELECTs reading `table` from now on."""
    reads: list[str] = []

    def statement(_conn: object, _cursor: object, sql: str, *_rest: object) -> None:
        if sql.lstrip().upper().startswith("SELECT") and f"FROM {table}" in sql:
            reads.append(sql)

    event.listen(harness.engine, "before_cursor_execute", statement)
    return reads


async def test_a_run_that_asked_no_approval_ends_without_looking_for_one(
    harness: Harness,
) -> None:
    """A run started here and never taken over can only have pending approvals it asked for
    here: one that asked none ends without a query for them (issue 29: a statement a run)."""
    app = await harness.app()
    approval_reads = selects_from(harness, "approval")
    harness.fake.script(answer("nothing to do"), answer("Nothing to do."))
    await app.manager.dispatch(harness.message("anything wrong?", root="10.1"))
    await app.manager.wait_idle(10)
    [run] = harness.runs()
    assert run.status == "done"
    assert approval_reads == []


async def test_a_run_opening_its_thread_reads_no_history_and_the_next_run_does(
    harness: Harness,
) -> None:
    """A thread made with the run's mention has no message before it, so its first run asks
    for none (issue 29: a statement a run); the thread's next run reads the first exchange."""
    app = await harness.app()
    history_reads = selects_from(harness, "message")
    harness.fake.script(answer("nothing to do"), answer("All quiet on api."))
    await app.manager.dispatch(harness.message("anything wrong with api?", root="11.1"))
    await app.manager.wait_idle(10)
    assert history_reads == []
    first_prompt = harness.fake.requests[0]["messages"]
    assert [m["content"] for m in first_prompt if m["role"] == "user"][-1].endswith(
        "anything wrong with api?"
    )

    harness.fake.script(answer("nothing to do"), answer("Web is fine too."))
    await app.manager.dispatch(harness.message("and web?", root="11.1"))
    await app.manager.wait_idle(10)
    assert len(history_reads) == 1  # the thread is known now: its next run reads it
    later = " ".join(str(m["content"]) for m in harness.fake.requests[2]["messages"])
    assert "anything wrong with api?" in later and "All quiet on api." in later
