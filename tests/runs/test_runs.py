"""RunManager through dispatch(): restarts, interrupts, dedupe, the call log, cancel, failures."""

from __future__ import annotations

import asyncio
import logging
import os
import re
import socket
import subprocess
from datetime import timedelta
from typing import Any

import pytest

from bot.approvals.schema import ApprovalPolicy
from bot.chat.ports import DispatchOutcome
from bot.clock import utcnow
from bot.engine.tools import ToolResult
from bot.runs.active import ActiveRun
from bot.runs.recovery import REPOSTED_NOTE
from bot.storage import queries
from bot.storage.models import Conversation, Message, Run
from tests.fakes.openai_server import answer, tool_call, tool_calls
from tests.runs.conftest import (
    SECRET,
    Harness,
    all_text,
    wait_for_step,
    wait_until_waiting,
)

pytestmark = pytest.mark.both_databases  # restarts resume; dedupe rows (ON CONFLICT)


async def test_new_app_resumes_a_pending_approval_and_each_tool_runs_once(
    harness: Harness,
) -> None:
    harness.fake.script(
        tool_calls(("ops__status", {"service": "api"}), ("ops__restart", {"service": "api"})),
        answer("restarted"),
        answer("Status checked and api restarted."),
    )
    first = await harness.app()
    await first.manager.dispatch(harness.message("check and restart api"))
    card = await first.surface.wait_for_card()
    await wait_until_waiting(first)
    await wait_for_step(first, "ops__status", "done")
    assert len(harness.tools["ops__status"].calls) == 1  # ran before the process went away
    await first.close()  # the process stops while the approval is pending
    assert [r.status for r in harness.runs()] == ["waiting_approval"]
    assert [a.status for a in harness.approvals()] == ["pending"]

    second = await harness.app()  # start() resumes the run from its checkpoint
    assert second.manager.active_count == 1
    result = await second.broker.decide(card.approval_id, "U_LEAD", "approve", platform="test")
    assert result.status == "decided"
    text = await second.surface.wait_for_answer()
    await second.manager.wait_idle(10)

    assert text == "Status checked and api restarted."
    assert len(harness.tools["ops__restart"].calls) == 1
    assert len(harness.tools["ops__status"].calls) == 1  # replayed from the call log, not re-run
    assert second.surface.of("post_approval_card") == []  # the card was not posted again
    updated = second.surface.of("update_approval_card")
    posted = first.surface.of("post_approval_card")[0]
    assert updated and updated[-1].message_id == posted.message_id
    assert updated[-1].payload.state == "approved"
    # the model saw both results in order after the resume
    tool_texts = all_text(harness.fake, lambda m: m.get("role") == "tool")
    assert len(tool_texts) == 2
    rows = harness.calls()
    assert sorted((r.tool_name, r.result_status) for r in rows) == [
        ("ops__restart", "ok"),
        ("ops__status", "ok"),
    ]
    assert [r.status for r in harness.runs()] == ["done"]
    harness.fake.assert_complete()


async def test_run_interrupted_mid_work_is_continued_by_the_next_process(
    harness: Harness,
) -> None:
    """The process stopped while the model was thinking (no checkpoint yet: no tool had been
    called): the next one adopts the run and asks again, on the same status message, and the
    thread gets its answer, never the restart notice."""
    harness.fake.hold()  # the model "thinks" forever: the run is mid-work
    harness.fake.script(answer("unused: the first process never hears it"))
    first = await harness.app()
    await first.manager.dispatch(harness.message("do something long"))
    await harness.fake.wait_for_requests(1)
    await first.close()
    assert [r.status for r in harness.runs()] == ["running"]
    status_id = harness.runs()[0].status_message_id

    harness.fake.script(answer("all done"), answer("All done."))
    second = await harness.app()
    harness.fake.release()
    text = await second.surface.wait_for_answer()
    await second.manager.wait_idle(10)
    assert text == "All done."
    [run] = harness.runs()
    assert run.status == "done" and run.owner == second.manager.leases.me
    assert second.surface.of("post_status") == []  # the status message goes on where it was
    assert {u.message_id for u in second.surface.of("update_status")} == {status_id}
    assert second.surface.of("post_notice") == []
    [request] = [m for m in harness.fake.requests[-2]["messages"] if m.get("role") == "user"]
    assert request["content"] == "do something long"  # asked once, not twice


async def test_an_adopted_run_finds_its_request_whatever_the_clocks_said(
    harness: Harness, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The owner's clock was a minute ahead when the run started, then stepped back (NTP) when
    a reply came: the reply is stored with an earlier time than the run's start. The process
    stops while the model thinks; the adopter asks again with the mention as the request and
    the reply as an interrupt, never with the reply taken for the request (and the mention put
    in the history before it)."""
    caplog.set_level(logging.INFO, logger="bot.runs.endings")
    real = queries.utcnow
    monkeypatch.setattr(queries, "utcnow", lambda: real() + timedelta(minutes=1))
    harness.fake.hold()
    harness.fake.script(answer("unused: the first process never hears it"))
    first = await harness.app()
    await first.manager.dispatch(harness.message("do something long"))
    await harness.fake.wait_for_requests(1)
    monkeypatch.setattr(queries, "utcnow", real)
    reply = harness.message("and be quick", user="U_OTHER", mentions_bot=False)
    assert (await first.manager.dispatch(reply)).kind == "interrupt"
    await first.close()

    harness.fake.script(answer("all done"), answer("All done."))
    second = await harness.app()
    harness.fake.release()
    assert await second.surface.wait_for_answer() == "All done."
    await second.manager.wait_idle(10)
    asked = [m["content"] for m in harness.fake.requests[-2]["messages"] if m["role"] == "user"]
    # asked once, and the reply read after it as what it was: an interrupt
    assert asked[0] == "do something long" and len(asked) == 2, asked
    assert asked[1].startswith("[USER INTERRUPT]") and asked[1].endswith("and be quick")
    # its time is this process's alone: the start another clock wrote makes no negative time
    [ended] = [r.getMessage() for r in caplog.records if " ended done" in r.getMessage()]
    assert re.search(r"ended done after \d+\.\d s here \(it began elsewhere", ended), ended


async def test_a_reply_unread_when_the_process_stopped_is_read_after_the_restart(
    harness: Harness,
) -> None:
    """A reply reaches the run while it waits for its approval; the process stops (a deploy)
    before the run reads it: the resumed run reads it before its next step, once, and its
    author may stop it."""
    harness.fake.script(
        tool_call("ops__restart", {"service": "api"}), answer("restarted"), answer("Done.")
    )
    first = await harness.app()
    await first.manager.dispatch(harness.message("restart api"))
    card = await first.surface.wait_for_card()
    await wait_until_waiting(first)
    reply = harness.message("use the blue-green path", user="U_OTHER", mentions_bot=False)
    assert (await first.manager.dispatch(reply)).kind == "interrupt"
    await first.close()

    second = await harness.app()
    await second.broker.decide(card.approval_id, "U_LEAD", "approve", platform="test")
    assert await second.surface.wait_for_answer() == "Done."
    users = all_text(harness.fake, lambda m: m.get("role") == "user")
    assert sum("[USER INTERRUPT]" in t and "blue-green" in t for t in users) == 1, users
    later = harness.fake.requests[-2]["messages"]  # the last step's request: read once only
    assert sum("blue-green" in str(m.get("content")) for m in later) == 1


async def test_replies_read_before_the_checkpoint_are_not_read_again(harness: Harness) -> None:
    """A reply read in an earlier step is in the checkpoint: a restart gives it to the model
    once (in the resumed history), never again as a new interrupt."""
    harness.fake.hold()
    first = await harness.app()
    await first.manager.dispatch(harness.message("restart api"))
    await harness.fake.wait_for_requests(1)
    reply = harness.message("use the blue-green path", user="U_OTHER", mentions_bot=False)
    assert (await first.manager.dispatch(reply)).kind == "interrupt"
    harness.fake.script(
        tool_call("ops__status", {"service": "api"}),  # read the reply first, then a step
        tool_call("ops__restart", {"service": "api"}),
        answer("restarted"),
        answer("Done."),
    )
    harness.fake.release()
    card = await first.surface.wait_for_card()
    await wait_until_waiting(first)
    await first.close()

    second = await harness.app()
    await second.broker.decide(card.approval_id, "U_LEAD", "approve", platform="test")
    assert await second.surface.wait_for_answer() == "Done."
    later = harness.fake.requests[-2]["messages"]
    assert sum("blue-green" in str(m.get("content")) for m in later) == 1, later


async def test_interrupt_reaches_the_model_as_user_interrupt(harness: Harness) -> None:
    harness.fake.hold()
    app = await harness.app()
    started = await app.manager.dispatch(harness.message("check api"))
    assert started.kind == "started"
    await harness.fake.wait_for_requests(1)
    late = await app.manager.dispatch(
        harness.message("actually check web too", user="U_OTHER", mentions_bot=False)
    )
    assert late.kind == "interrupt" and late.run_id == started.run_id
    harness.fake.script(
        tool_call("ops__status", {"service": "api"}),
        answer("api and web fine"),
        answer("Both are fine."),
    )
    harness.fake.release()
    await app.surface.wait_for_answer()
    await app.manager.wait_idle(10)
    users = all_text(harness.fake, lambda m: m.get("role") == "user")
    assert any("[USER INTERRUPT]" in t and "actually check web too" in t for t in users)
    pinned = harness.rows(Message, pinned=True)
    assert [m.text for m in pinned] == ["actually check web too"]
    assert len(harness.runs()) == 1


async def test_duplicate_event_id_starts_nothing(harness: Harness) -> None:
    harness.fake.script(answer("hi"), answer("Hello!"))
    app = await harness.app()
    message = harness.message("hello", event_id="Ev-dup")
    assert (await app.manager.dispatch(message)).kind == "started"
    assert (await app.manager.dispatch(message)).kind == "duplicate"
    await app.surface.wait_for_answer()
    other = await harness.app()  # a fresh process: the table, not the cache, says duplicate
    assert (await other.manager.dispatch(message)).kind == "duplicate"
    assert len(harness.runs()) == 1 and len(harness.rows(Message, role="user")) == 1


async def test_message_in_a_foreign_thread_without_mention_is_ignored(harness: Harness) -> None:
    app = await harness.app()
    outcome = await app.manager.dispatch(harness.message("chatter", mentions_bot=False))
    assert outcome.kind == "ignored"
    assert harness.rows(Conversation) == [] and harness.runs() == []


async def test_next_turn_in_a_thread_gets_its_history(harness: Harness) -> None:
    harness.fake.script(answer("a1"), answer("First answer."), answer("a2"), answer("Second."))
    app = await harness.app()
    await app.manager.dispatch(harness.message("first question"))
    await app.surface.wait_for_answer()
    await app.manager.wait_idle(10)
    assert (await app.manager.dispatch(harness.message("follow up", mentions_bot=False))).kind == (
        "started"
    )
    await app.surface.wait_for_answer(count=2)
    third = [m.get("content") for m in harness.fake.messages(2)]
    assert "first question" in third and "First answer." in third and "follow up" in third


async def test_many_conversations_run_at_once(harness: Harness) -> None:
    harness.fake.respond_with(lambda body: answer("fine"))
    app = await harness.app()
    outcomes = await asyncio.gather(
        *(app.manager.dispatch(harness.message(f"q{i}", root=f"r{i}")) for i in range(6))
    )
    assert [o.kind for o in outcomes] == ["started"] * 6
    await app.surface.wait_for(lambda: len(app.surface.answers()) == 6)
    await app.manager.wait_idle(10)
    assert sorted(r.status for r in harness.runs()) == ["done"] * 6
    assert len(harness.rows(Conversation)) == 6


async def test_call_log_rows_for_executed_rejected_and_expired_with_secrets_redacted(
    harness: Harness,
) -> None:
    harness.add_tool("ops__deploy", ApprovalPolicy(approval="required", timeout_s=0.2))
    harness.fake.script(
        tool_calls(
            ("ops__status", {"service": "api", "password": "hunter2-pw", "note": f"k={SECRET}"}),
            ("ops__restart", {"service": "api", "api_key": SECRET}),
            ("ops__deploy", {"service": "api"}),
        ),
        answer("done"),
        answer("Done."),
    )
    app = await harness.app()
    await app.manager.dispatch(harness.message("status, restart, deploy"))
    await app.surface.wait_for_card(count=2)
    restart = next(c for c in app.surface.cards() if c.tool_name == "ops__restart")
    assert SECRET not in restart.arguments and "[REDACTED]" in restart.arguments
    await app.broker.decide(restart.approval_id, "U_LEAD", "reject", "not now", platform="test")
    await app.surface.wait_for_answer()
    await app.manager.wait_idle(10)

    rows = {r.tool_name: r for r in harness.calls()}
    assert {k: v.result_status for k, v in rows.items()} == {
        "ops__status": "ok",
        "ops__restart": "rejected",
        "ops__deploy": "expired",
    }
    assert rows["ops__restart"].approvers == ["U_LEAD"]
    assert rows["ops__restart"].approval_status == "rejected"
    assert rows["ops__deploy"].approval_status == "expired"
    assert rows["ops__status"].approval_status == "not_required"
    for row in rows.values():
        assert row.run_id and row.tool_call_id and row.fingerprint
        assert row.platform == "test" and row.channel == "C1" and row.requester == "U_DEV"
        dumped = repr(row.model_dump())
        assert SECRET not in dumped and "hunter2-pw" not in dumped
    assert rows["ops__status"].arguments["password"] == "[REDACTED]"
    assert rows["ops__restart"].error and "REJECTED" in rows["ops__restart"].error
    assert rows["ops__status"].connector == "ops" and rows["ops__status"].action == "status"


async def test_call_log_row_for_a_blocked_call(harness: Harness) -> None:
    harness.fake.script(
        tool_call("ops__restart", {"service": "api"}), answer("blocked"), answer("Read-only.")
    )
    app = await harness.app(read_only=True)
    await app.manager.dispatch(harness.message("restart api"))
    await app.surface.wait_for_answer()
    (row,) = harness.calls()
    assert row.result_status == "blocked" and "read-only" in (row.error or "")
    assert harness.tools["ops__restart"].calls == [] and app.surface.cards() == []


async def test_cancelled_run_cancels_its_approval_and_updates_the_card(harness: Harness) -> None:
    harness.fake.script(tool_call("ops__restart", {"service": "api"}))
    app = await harness.app()
    thread = harness.message("x").thread
    await app.manager.dispatch(harness.message("restart api"))
    card = await app.surface.wait_for_card()
    assert await app.manager.cancel(thread)
    final = await app.surface.wait_for_card_state(card.approval_id, "cancelled")
    assert final.state == "cancelled"
    assert [r.status for r in harness.runs()] == ["cancelled"]
    assert app.surface.status_of()[0].state == "cancelled"
    late = await app.broker.decide(card.approval_id, "U_LEAD", "approve", platform="test")
    assert late.status == "already_decided"
    assert harness.tools["ops__restart"].calls == []


async def test_a_failing_surface_fails_the_run_and_says_so(harness: Harness) -> None:
    harness.fake.script(answer("hi"), answer("Hello!"))
    app = await harness.app()
    app.surface.fail_next("post_answer")
    await app.manager.dispatch(harness.message("hello"))
    notice = await app.surface.wait_for_notice()
    await app.manager.wait_idle(10)
    assert "failed" in notice.payload
    (run,) = harness.runs()
    assert run.status == "failed" and "RuntimeError" in (run.error or "")
    assert app.surface.status_of()[0].state == "failed"


async def test_a_reply_too_late_for_the_run_starts_a_follow_up(harness: Harness) -> None:
    harness.fake.script(answer("a1"), answer("First."), answer("b1"), answer("Second."))
    harness.fake.hold()
    app = await harness.app()
    await app.manager.dispatch(harness.message("first question"))
    await harness.fake.wait_for_requests(1)
    harness.fake.release()  # the loop's request goes through ...
    harness.fake.hold()  # ... and the answer synthesis parks
    await harness.fake.wait_for_requests(2)
    late = await app.manager.dispatch(harness.message("one more thing", mentions_bot=False))
    assert late.kind == "interrupt"
    harness.fake.release()
    await app.surface.wait_for_answer(count=2)
    await app.manager.wait_idle(10)
    runs = sorted(harness.runs(), key=lambda r: r.started_at)
    assert [r.query for r in runs] == ["first question", "one more thing"]
    assert [r.status for r in runs] == ["done", "done"]
    follow_up = [m.get("content") for m in harness.fake.messages(2)]
    assert follow_up.count("one more thing") == 1 and "First." in follow_up


async def test_an_approved_call_running_when_the_process_stops_is_not_run_again(
    harness: Harness,
) -> None:
    """Two approvals in one response: the first is approved and its tool is mid-call when the
    process stops (the run still waits for the second). The new process must not re-run it."""
    restart = harness.tools["ops__restart"]
    started, hold = asyncio.Event(), asyncio.Event()

    async def slow(args: dict[str, Any]) -> ToolResult:
        restart.calls.append(dict(args))
        started.set()
        await hold.wait()
        return ToolResult("restarted")

    restart.invoke = slow  # type: ignore[method-assign]
    harness.fake.script(
        tool_calls(("ops__restart", {"service": "api"}), ("ops__restart", {"service": "web"})),
        answer("api unknown, web restarted"),
        answer("Web restarted; check api."),
    )
    first = await harness.app()
    await first.manager.dispatch(harness.message("restart api and web"))
    await first.surface.wait_for_card(count=2)
    api, web = sorted(first.surface.cards(), key=lambda c: '"web"' in c.arguments)
    await first.broker.decide(api.approval_id, "U_LEAD", "approve", platform="test")
    await asyncio.wait_for(started.wait(), 10)  # the api restart is running ...
    await first.close()  # ... when the process stops
    assert [r.status for r in harness.runs()] == ["waiting_approval"]
    hold.set()

    second = await harness.app()
    assert (
        await second.broker.decide(web.approval_id, "U_LEAD", "approve", platform="test")
    ).status == "decided"
    await second.surface.wait_for_answer()
    await second.manager.wait_idle(10)
    assert [c["service"] for c in restart.calls] == ["api", "web"]
    rows = {r.arguments["service"]: r for r in harness.calls()}
    # the write-ahead row of the api restart was never completed: its outcome is unknown
    assert rows["api"].result_status == "started" and rows["api"].approvers == ["U_LEAD"]
    assert rows["web"].result_status == "ok"
    assert len(harness.calls()) == 2  # the replayed attempt is not logged again
    seen = all_text(harness.fake, lambda m: m.get("role") == "tool")
    assert any("its outcome is unknown" in t for t in seen)


async def test_a_run_cancelled_while_its_card_is_being_posted_still_updates_the_card(
    harness: Harness,
) -> None:
    """The platform has the card but has not answered when the run is cancelled: the card
    must still end up showing the cancellation, never live buttons nobody can use."""
    harness.fake.script(tool_call("ops__restart", {"service": "api"}))
    app = await harness.app()
    landed, release = app.surface.hold_next("post_approval_card")
    thread = harness.message("x").thread
    await app.manager.dispatch(harness.message("restart api"))
    await asyncio.wait_for(landed.wait(), 10)
    card = app.surface.cards()[0]
    cancelling = asyncio.create_task(app.manager.cancel(thread))
    await asyncio.sleep(0)  # let the cancellation reach the run before the platform answers
    release.set()
    assert await asyncio.wait_for(cancelling, 10)
    final = await app.surface.wait_for_card_state(card.approval_id, "cancelled")
    assert final.state == "cancelled"
    assert [a.status for a in harness.approvals()] == ["cancelled"]
    assert harness.tools["ops__restart"].calls == []


async def test_a_call_without_approval_cut_short_by_the_stop_is_not_run_again_on_resume(
    harness: Harness,
) -> None:
    """A read-only call runs beside one that waits for approval; the process stops while it is
    mid-call. Its write-ahead row says it went out, so the resumed run does not run it again:
    the model is told its outcome is unknown, and the run goes on to the approval."""
    status = harness.tools["ops__status"]
    started, hold = asyncio.Event(), asyncio.Event()

    async def slow(args: dict[str, Any]) -> ToolResult:
        status.calls.append(dict(args))
        started.set()
        await hold.wait()
        return ToolResult("api: ok")

    status.invoke = slow  # type: ignore[method-assign]
    harness.fake.script(
        tool_calls(("ops__status", {"service": "api"}), ("ops__restart", {"service": "api"})),
        answer("status unknown, api restarted"),
        answer("Restarted api; its status check did not finish."),
    )
    first = await harness.app()
    await first.manager.dispatch(harness.message("check and restart api"))
    await first.surface.wait_for_card()
    await asyncio.wait_for(started.wait(), 10)  # the status call is running ...
    await first.close()  # ... when the process stops, while the restart waits for approval
    assert [r.status for r in harness.runs()] == ["waiting_approval"]
    assert [c.result_status for c in harness.calls()] == ["started"]
    hold.set()

    second = await harness.app()
    card = first.surface.cards()[0]
    decided = await second.broker.decide(card.approval_id, "U_LEAD", "approve", platform="test")
    assert decided.status == "decided"
    await second.surface.wait_for_answer()
    await second.manager.wait_idle(10)
    assert len(status.calls) == 1  # never run again
    assert harness.tools["ops__restart"].calls == [{"service": "api"}]
    assert [r.status for r in harness.runs()] == ["done"]
    rows = {r.tool_name: r.result_status for r in harness.calls()}
    assert rows == {"ops__status": "started", "ops__restart": "ok"}
    seen = all_text(harness.fake, lambda m: m.get("role") == "tool")
    assert any("`ops__status` was started before the bot restarted" in t for t in seen)


async def test_a_process_starting_during_a_run_takes_nothing_with_a_live_lease(
    harness: Harness,
) -> None:
    """A second process starts while the first is still working on a run (a deploy overlap):
    the run's lease is alive, so the second takes nothing (no restart notice, no second status
    message); the first finishes the run and posts its one answer."""
    harness.fake.script(answer("done looking"), answer("Everything is fine."))
    first = await harness.app()
    harness.fake.hold()
    await first.manager.dispatch(harness.message("is everything fine?"))
    await harness.fake.wait_for_requests(1)  # the first process's run waits for the model
    second = await harness.app()
    await second.recovery.wait(10)
    second.recovery.kick()  # a later scan takes nothing either
    await asyncio.sleep(0.2)
    assert second.manager.active_count == 0 and second.surface.calls == []
    harness.fake.release()
    assert await first.surface.wait_for_answer() == "Everything is fine."
    await first.manager.wait_idle(10)
    [run] = harness.runs()
    assert (run.status, run.owner) == ("done", first.manager.leases.me)
    assert second.surface.calls == []


async def test_recovery_leaves_a_run_on_a_platform_this_process_does_not_serve(
    harness: Harness,
) -> None:
    """Two orphaned runs: one on this process's platform, one on Slack, which this process
    has no surface for. Only the first is taken over (its thread is told); the Slack run is
    left unowned and live for a process that can tell its thread, even after a later scan."""
    here = harness.db.call(queries.get_or_create_conversation, "test", "T1", "C1", "1.0")
    there = harness.db.call(queries.get_or_create_conversation, "slack", "T1", "C1", "2.0")
    orphans = {
        conv.platform: harness.db.call(
            queries.add_run,
            queries.new_run(conversation_id=conv.id, requester="U1", query="q", owner=None),
        )
        for conv in (here, there)
    }
    app = await harness.app()
    app.recovery.kick()
    await app.surface.wait_for_notice()
    await asyncio.sleep(0.2)  # the kicked scan
    ended = harness.db.call(queries.get_run, orphans["test"].id)
    left = harness.db.call(queries.get_run, orphans["slack"].id)
    assert ended.status == "failed" and ended.owner == app.manager.leases.me
    assert (left.status, left.owner, left.lease_epoch) == ("running", None, 0)
    assert {c.thread.platform for c in app.surface.calls} == {"test"}


def _dead_pid() -> int:
    """A pid this host no longer runs (a child that exited and was reaped)."""
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


async def _ended(harness: Harness, run_id: str, status: str) -> Run:
    for _ in range(300):  # bounded: 30 s
        run = harness.db.call(queries.get_run, run_id)
        if run.status == status:
            return run
        await asyncio.sleep(0.1)
    raise AssertionError(f"run {run_id} is {run.status}, never {status}")


def _answering_orphan(harness: Harness, owner: str) -> str:
    """A run whose owner stored its answer and was posting it when its lease lapsed."""
    conv = harness.db.call(queries.get_or_create_conversation, "test", "T1", "C1", "3.0")
    run = harness.db.call(
        queries.add_run,
        queries.new_run(conversation_id=conv.id, requester="U1", query="q", owner=owner,
                        lease_until=utcnow() - timedelta(seconds=5)),
    )  # fmt: skip
    harness.db.call(queries.update_run, run.id, status="answering", answer="All fine.")
    return run.id


async def test_an_adopter_waits_for_the_answer_a_live_owner_posted_and_does_not_repost_it(
    harness: Harness,
) -> None:
    """The owner (alive on this host) lost its lease while posting its answer, say across a
    database outage: the adopter gives it time to record the answer's message, sees it, and
    ends the run done without posting the answer a second time."""
    run_id = _answering_orphan(harness, f"{socket.gethostname()}:{os.getpid()}:1")
    starting = asyncio.create_task(harness.app(chatops_lease_s=2))  # returns once recovered
    await asyncio.sleep(1.0)  # the adopter waits: the owner's next try records the message
    harness.db.call(queries.update_run, run_id, answer_message_id="m-posted-by-the-owner")
    app = await starting
    ended = await _ended(harness, run_id, "done")
    assert app.surface.answers() == [] and ended.owner == app.manager.leases.me


async def test_an_adopter_reposts_the_answer_of_an_owner_that_is_surely_gone(
    harness: Harness,
) -> None:
    """The owner's pid is gone from this host: nobody will record the answer, so it is posted
    at once, with the note that says why it may be there twice."""
    run_id = _answering_orphan(harness, f"{socket.gethostname()}:{_dead_pid()}:1")
    app = await harness.app(chatops_lease_s=60)  # a wait would be a minute: none is made
    [posted] = [await app.surface.wait_for_answer(timeout=5)]
    assert posted.startswith("All fine.") and REPOSTED_NOTE in posted
    await _ended(harness, run_id, "done")
    registry = app.manager.metrics.registry  # counted by the adopter, which ended it
    for _ in range(100):  # the row shows done a moment before the adopter counts it
        if registry.get_sample_value("chatops_runs_total", {"outcome": "done"}) == 1:
            break
        await asyncio.sleep(0.05)
    assert registry.get_sample_value("chatops_runs_total", {"outcome": "done"}) == 1


async def test_the_thread_is_free_the_moment_its_run_ends(harness: Harness) -> None:
    """A reply dispatched right after the run's last look at its replies starts the next run:
    nothing may run between that look and the thread being free (else the reply is queued as
    an interrupt of a run that has ended, and is never answered)."""
    harness.fake.script(answer("a1"), answer("First."), answer("b1"), answer("Second."))
    app = await harness.app()
    runner = app.manager._runner
    finished = runner.conversation
    still_held: list[bool] = []
    replies: list[asyncio.Task[DispatchOutcome]] = []

    def right_after(conversation_id: int) -> None:
        still_held.append(app.manager.active_in(conversation_id) is not None)
        late = harness.message("one more thing", mentions_bot=False)
        replies.append(asyncio.ensure_future(app.manager.dispatch(late)))

    async def conversation(active: ActiveRun, *args: Any) -> None:
        await finished(active, *args)
        if not replies:
            asyncio.get_running_loop().call_soon(right_after, active.conversation_id)

    runner.conversation = conversation  # type: ignore[method-assign]
    await app.manager.dispatch(harness.message("first question"))
    await app.surface.wait_for_answer(count=1)
    await app.surface.wait_for(lambda: bool(replies))
    assert still_held == [False]
    assert (await replies[0]).kind == "started"
    await app.surface.wait_for_answer(count=2)
    await app.manager.wait_idle(10)
    assert [r.status for r in harness.runs()] == ["done", "done"]
