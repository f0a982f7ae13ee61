"""RunManager.stop, the one way a person stops a run (the real agent, broker and database, a
recording surface): who may, which answers it gives, and that a stop acknowledged before a
crash is never undone by the restart; a feedback click stored before a crash is applied after
it (both databases)."""

from __future__ import annotations

import asyncio

import pytest

from bot.chat.controls import FeedbackClick, StopRequest
from bot.chat.threads import MessageRef
from bot.inbox.inbox import Inbox
from bot.runs.feedback import FeedbackRecorder
from bot.storage import feedback as feedback_queries
from bot.storage.models import InboxEvent, RunFeedback
from tests.fakes.openai_server import answer, tool_call
from tests.runs.conftest import Harness, wait_until_waiting

pytestmark = pytest.mark.both_databases  # stops survive a crash (conditional updates)


async def test_stop_answers_who_may_and_what_became_of_the_run(harness: Harness) -> None:
    harness.fake.script(tool_call("ops__restart", {"service": "api"}))
    app = await harness.app()
    await app.manager.dispatch(harness.message("restart api", user="U_DEV"))
    await wait_until_waiting(app)
    [run] = harness.runs()
    manager = app.manager
    assert (await manager.stop("nope", by="U_DEV", platform="test")).status == "not_found"
    assert (await manager.stop(run.id, by="U_DEV", platform="slack")).status == "not_found"
    assert (await manager.stop(run.id, by="U_EVE", platform="test")).status == "refused"
    assert (await manager.stop(run.id, by="", platform="test")).status == "refused"
    request = StopRequest(platform="test", user_id="U_DEV", thread=harness.message("x").thread)
    assert (await manager.stop_request(request)).status == "stopping"
    assert (await manager.stop(run.id, by="U_DEV", platform="test")).status in (
        "already_stopping", "not_running",
    )  # fmt: skip
    await manager.wait_idle(10)
    assert (await manager.stop(run.id, by="U_DEV", platform="test")).status == "not_running"
    [ended] = harness.runs()
    assert (ended.status, ended.stopped_by) == ("cancelled", "U_DEV")
    assert ended.error == "stopped by U_DEV"
    [card] = app.surface.cards()
    assert card.state == "cancelled"
    notice = app.surface.notices()[-1]
    assert (notice.payload, notice.extra["mention"]) == ("stopped this run.", ("U_DEV",))
    assert harness.tools["ops__restart"].calls == []


async def test_a_stop_recorded_before_a_crash_is_never_undone_by_the_restart(
    harness: Harness,
) -> None:
    """The Stop was acknowledged (`stopped_by` written) when the process died, before the run
    ended: the next process does not resume the run waiting for its approval, it ends it."""
    harness.fake.script(tool_call("ops__restart", {"service": "api"}))
    first = await harness.app()
    await first.manager.dispatch(harness.message("restart api", user="U_DEV"))
    await wait_until_waiting(first)
    [run] = harness.runs()
    live = ("running", "waiting_approval")
    assert await harness.db.run(feedback_queries.mark_stopped, run.id, "U_DEV", live)
    await first.close()  # the crash: the run is left waiting, its stop recorded
    assert [r.status for r in harness.runs()] == ["waiting_approval"]
    second = await harness.app()
    await second.surface.wait_for_notice()
    [ended] = harness.runs()
    assert (ended.status, ended.stopped_by) == ("cancelled", "U_DEV")
    [approval] = harness.approvals()
    assert approval.status == "cancelled"
    notice = second.surface.notices()[-1]
    assert notice.payload == "stopped this run." and notice.extra["mention"] == ("U_DEV",)
    assert harness.tools["ops__restart"].calls == []


async def test_a_feedback_click_stored_before_a_crash_is_applied_after_it(
    harness: Harness,
) -> None:
    harness.fake.script(answer("all quiet"), answer("All quiet."))
    app = await harness.app()
    await app.manager.dispatch(harness.message("how are things?"))
    await app.surface.wait_for_answer()
    await app.manager.wait_idle(10)
    [posted] = app.surface.of("post_answer")
    answer_ref = MessageRef(posted.thread, posted.message_id)
    [run] = harness.runs()
    assert run.answer_message_id == answer_ref.message_id and posted.extra["feedback_run"]
    never = asyncio.Event()  # the workers of the first inbox never start: a crash after the ack
    first = Inbox(harness.db, dispatch=app.manager.dispatch, decide=None,  # type: ignore[arg-type]
                  feedback=FeedbackRecorder(harness.db), ready=never.wait,
                  owner="gone-host:1:1")  # fmt: skip
    click = FeedbackClick(platform="test", user_id="U_LEAD", rating="up",
                          message=MessageRef(answer_ref.thread, answer_ref.message_id))  # fmt: skip
    await first.accept_feedback(click)
    assert [r.kind for r in harness.rows(InboxEvent)] == ["feedback"]
    assert harness.rows(RunFeedback) == []
    await first.close()
    second = Inbox(harness.db, dispatch=app.manager.dispatch, decide=None,  # type: ignore[arg-type]
                   feedback=FeedbackRecorder(harness.db), owner=app.manager.leases.me,
                   claim_orphans=app.manager.leases.claim_inbox)  # fmt: skip
    assert await second.adopt({"gone-host:1:1"}) == 1
    await second.wait_idle(10)
    assert [(r.user_id, r.rating) for r in harness.rows(RunFeedback)] == [("U_LEAD", "up")]
    assert harness.rows(InboxEvent) == []
    await second.close()
