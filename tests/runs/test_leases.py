"""Leases on SQLite and PostgreSQL: who is gone, and that every take-over has one winner
(two processes adopting one run, taking one reply, claiming one inbox event)."""

from __future__ import annotations

import asyncio
import logging
import os
from datetime import timedelta

import pytest

from bot.approvals import routing
from bot.chat.decisions import CardClick
from bot.clock import AlignedClock, utcnow
from bot.runs.leases import LeaseKeeper, ProcessIdentity, gone
from bot.storage import leases as lease_queries
from bot.storage import queries
from bot.storage.database import Database
from bot.storage.models import InboxEvent, Message, Run, RunMail
from tests.fakes.openai_server import answer, tool_call
from tests.runs.conftest import Harness

pytestmark = pytest.mark.both_databases  # leases: one winner per take-over

GONE = "other-host:4242:1"

SERVED = ("slack",)  # the platforms the adopting process has a surface for


def keeper(db: Database, host: str, started: int) -> LeaseKeeper:
    return LeaseKeeper(db, ProcessIdentity(host, os.getpid(), started), lease_s=15)


def a_run(db: Database, *, owner: str | None, lease_s: float) -> Run:
    conv = db.call(queries.get_or_create_conversation, "slack", "T1", "C1", "1.0")
    run = queries.new_run(
        conversation_id=conv.id, requester="U1", query="q", owner=owner,
        lease_until=utcnow() + timedelta(seconds=lease_s),
    )  # fmt: skip
    return db.call(queries.add_run, run)


def test_who_is_gone() -> None:
    """Gone: not among the live processes (leases judged by the database's clock), or on this
    host with its pid gone."""
    me = ProcessIdentity("here", os.getpid(), 1)
    live = {"there:1:1", "here:999999:1", f"here:{os.getppid()}:1"}
    owners = [*live, "there:2:1", "unknown:3:1", "", me.id]
    dead = gone(owners, live, me)
    assert dead == {"there:2:1", "here:999999:1", "unknown:3:1", ""}


async def test_two_processes_adopting_one_run_exactly_one_wins(db: Database) -> None:
    run = a_run(db, owner=GONE, lease_s=-1)  # its owner's lease lapsed
    first, second = keeper(db, "a", 1), keeper(db, "b", 2)
    try:
        dead = {GONE}
        won = await asyncio.gather(first.claim(run, dead), second.claim(run, dead))
        assert sorted(won) == [False, True]
        owner = db.call(queries.get_run, run.id).owner
        assert owner == (first.me if won[0] else second.me)
    finally:
        await first.close()
        await second.close()


async def test_a_live_lease_is_never_taken(db: Database) -> None:
    holder, newcomer = keeper(db, "a", 1), keeper(db, "b", 2)
    try:
        await holder.register()
        run = a_run(db, owner=holder.me, lease_s=15)
        dead = await newcomer.dead_owners()
        assert dead == set()
        assert await newcomer.adoptable(dead, SERVED) == []
        assert not await newcomer.claim(run, dead)  # even asked directly
        await holder.release()  # a clean shutdown: taken at once
        dead = await newcomer.dead_owners()
        assert [r.id for r, _ in await newcomer.adoptable(dead, SERVED)] == [run.id]
        assert await newcomer.claim(run, dead)
    finally:
        await holder.close()
        await newcomer.close()


async def test_mail_and_inbox_events_are_taken_once(db: Database) -> None:
    run = a_run(db, owner="a:1:1", lease_s=15)
    said = queries.new_message(
        conversation_id=run.conversation_id, role="user", author="U2", text="also web"
    )
    reply = db.call(queries.add_message, said)
    assert isinstance(reply, Message)
    for _ in range(5):
        db.call(lease_queries.add_mail, RunMail(run_id=run.id, message_id=reply.id, text="x"))
        db.call(
            queries.add_inbox_events,
            [(InboxEvent(platform="slack", kind="message", owner=GONE), "")],
        )  # noqa: E501
    takes = await asyncio.gather(
        *(db.run(lease_queries.take_mail, [run.id], f"p{i}") for i in range(4))
    )
    assert sorted(m.id for got in takes for m in got) == sorted(
        {m.id for got in takes for m in got}
    )
    assert sum(len(got) for got in takes) == 5
    claims = await asyncio.gather(
        *(db.run(lease_queries.claim_inbox, f"p{i}", {GONE}) for i in range(4))
    )
    assert sum(len(got) for got in claims) == 5
    assert db.call(lease_queries.claim_inbox, "late", {GONE}) == []


async def test_a_click_on_another_process_waits_for_the_card_to_be_recorded(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The card reached the chat but its poster has not recorded where yet (the platform has
    not answered): a click on it reaching another process is decided once the record lands,
    never refused as "not on this card"; a click on any other message is still refused."""
    monkeypatch.setattr(routing, "CARD_RECORD_WAIT_S", 1.0)
    harness.fake.script(tool_call("ops__restart", {"service": "api"}), answer("restarted"))
    owner, other = await harness.app(), await harness.app()
    landed, release = owner.surface.hold_next("post_approval_card")
    await owner.manager.dispatch(harness.message("restart api"))
    await asyncio.wait_for(landed.wait(), 10)
    card = owner.surface.of("post_approval_card")[0]
    approval_id = owner.surface.cards()[0].approval_id

    def click(message_id: str) -> CardClick:
        return CardClick(platform="test", workspace="T1", channel="C1", message_id=message_id)

    try:
        forged = await other.broker.decide(
            approval_id, "U_LEAD", "approve", platform="test", click=click("m-elsewhere")
        )
        assert forged.status == "wrong_card"  # after the bounded wait, the card still unrecorded
        decision = asyncio.create_task(
            other.broker.decide(
                approval_id, "U_LEAD", "approve", platform="test", click=click(card.message_id)
            )
        )
        await asyncio.sleep(0.3)
        assert not decision.done()  # waiting for the record, not refusing
        release.set()  # the platform answers: the poster records the card
        assert (await asyncio.wait_for(decision, 10)).status == "decided"
    finally:
        release.set()  # whatever happened, the held post answers
    await owner.broker.poll()  # the owner's safety net (no wake-ups between these two)
    assert await owner.surface.wait_for_answer() == "restarted"
    assert len(harness.tools["ops__restart"].calls) == 1
    assert [a.status for a in harness.approvals()] == ["approved"]


async def test_a_stalled_follow_up_never_delays_a_renewal(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The heartbeat's follow-up (mail, approvals) hangs, as on a database busy with other
    work: the process and its waiting run stay live through three leases, nobody may adopt
    the run, and the process still takes over the run of a process that is gone."""
    harness.fake.script(tool_call("ops__restart", {"service": "api"}), answer("restarted"))
    app = await harness.app(chatops_lease_s=1.0)
    await app.manager.dispatch(harness.message("restart api"))
    await app.surface.wait_for(lambda: app.surface.cards())
    entered, hung = asyncio.Event(), asyncio.Event()

    async def hanging_poll() -> None:
        entered.set()
        await hung.wait()

    monkeypatch.setattr(app.broker, "poll", hanging_poll)
    await asyncio.wait_for(entered.wait(), 5)
    observer = keeper(harness.db, "observer", 2)
    try:
        for _ in range(15):  # 3 s: three leases of 1 s
            await asyncio.sleep(0.2)
            dead = await observer.dead_owners()
            assert dead == set() and await observer.adoptable(dead, ("test",)) == []
        await orphan_is_taken_over(harness, app.manager.leases.me)
    finally:
        hung.set()
        await observer.close()
    run = next(r for r in harness.runs() if r.query == "restart api")
    assert run.owner == app.manager.leases.me and run.status == "waiting_approval"


async def orphan_is_taken_over(harness: Harness, me: str) -> None:
    """A run of a gone process appears; within a few beats it is this process's."""
    harness.fake.script(answer("all fine"), answer("All fine."))
    conv = harness.db.call(queries.get_or_create_conversation, "test", "T1", "C1", "2.0")
    orphan = queries.new_run(
        conversation_id=conv.id, requester="U1", query="status please", owner=GONE,
        lease_until=utcnow() - timedelta(seconds=1),
    )  # fmt: skip
    harness.db.call(queries.add_run, orphan)
    for _ in range(50):
        if harness.db.call(queries.get_run, orphan.id).owner == me:
            return
        await asyncio.sleep(0.1)
    raise AssertionError("the gone process's run was never taken over")


async def test_the_keeper_moves_its_clock_onto_the_databases(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    """A host a minute ahead: registering measures the offset (and says so), every beat
    measures it again; approvals read their deadlines in the moved clock."""
    caplog.set_level(logging.INFO, logger="bot.runs.leases")
    clock = AlignedClock(local=lambda: utcnow() + timedelta(minutes=1))
    skewed = LeaseKeeper(db, ProcessIdentity("ahead", os.getpid(), 1), lease_s=15, clock=clock)
    try:
        await skewed.register()
        assert abs(clock.now() - utcnow()) < timedelta(seconds=5)
        assert any("60.0 s ahead of the database's" in r.getMessage() for r in caplog.records)
        clock.offset = timedelta(0)  # as if the host's clock had just been stepped
        await skewed.renew([])
        assert abs(clock.now() - utcnow()) < timedelta(seconds=5)
    finally:
        await skewed.close()
