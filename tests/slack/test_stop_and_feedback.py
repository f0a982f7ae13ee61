"""Stop and feedback from Slack, through signed requests against the real app.

Stop (the status message's button, or Slack's own stop: `agent_session_stopped`) cancels the
run: the model call in flight is abandoned, a pending approval ends cancelled (its card says
so), a tool already running finishes but its result is not read, and the thread says who
stopped it. Only requesters and approvers may; the run is the one whose status message was
clicked, whatever the button says. Feedback (thumbs under the answer) is one row per person,
changeable, and only on an answer.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import Session, create_engine, select

from bot.storage.models import CallLog, Run, RunFeedback
from bot.surfaces.slack.cards import APPROVE_ACTION
from bot.surfaces.slack.render import STOP_ACTION
from tests.fakes.openai_server import FakeOpenAI, answer, tool_call
from tests.fakes.ops_api import OpsAPI, restart_then_answer
from tests.fakes.slack_api import FakeSlack
from tests.slack.e2e import SlackBot, card_in, has_buttons, ops_bot, texts
from tests.slack.payloads import (
    CHANNEL,
    block_actions,
    feedback_click,
    mention,
    message,
    session_stopped,
)


@pytest.fixture
async def bot(
    database_url, aiohttp_client, tmp_path: Path, ops_api: OpsAPI, fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
) -> SlackBot:  # fmt: skip
    return await ops_bot(aiohttp_client, database_url, tmp_path, ops_api.url, fake_slack,
                         fake_openai.base_url, approvers=("U0LEAD",))  # fmt: skip


def runs(database_url: str) -> list[Run]:
    with Session(create_engine(database_url)) as session:
        return list(session.exec(select(Run).order_by(Run.started_at)).all())


def feedback(database_url: str) -> list[tuple[str, str]]:
    with Session(create_engine(database_url)) as session:
        rows = session.exec(select(RunFeedback).order_by(RunFeedback.user_id)).all()
        return [(r.user_id, r.rating) for r in rows]


def status_of(fake: FakeSlack, root: str) -> dict[str, Any]:
    return fake.thread_messages(CHANNEL, root)[0]


def stop_button_shown(fake: FakeSlack, root: str) -> bool:
    return any(
        e.get("action_id") == STOP_ACTION
        for b in status_of(fake, root).get("blocks", []) if b.get("type") == "actions"
        for e in b["elements"]
    )  # fmt: skip


async def waiting_run(bot: SlackBot, fake: FakeSlack) -> tuple[str, dict[str, Any]]:
    """U0DEV asks for a restart; the run waits for U0LEAD's approval with Stop on its status."""
    root, card = await bot.request_restart()
    waiting = ":raised_hand: Waiting for approval"
    await fake.wait_for(lambda: status_of(fake, root)["text"].startswith(waiting), 15)
    assert stop_button_shown(fake, root)
    return root, card


async def test_the_requester_stops_a_run_waiting_for_approval(
    bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, ops_api: OpsAPI,
    database_url: str,
) -> None:  # fmt: skip
    fake_openai.respond_with(restart_then_answer)
    root, _ = await waiting_run(bot, fake_slack)
    assert await bot.click(status_of(fake_slack, root), STOP_ACTION, user="U0DEV") == 200
    await bot.wait_idle()
    [run] = runs(database_url)
    assert (run.status, run.stopped_by) == ("cancelled", "U0DEV")
    assert ops_api.restarts == []  # the call waiting for approval never ran
    card = card_in(fake_slack, root)
    assert card is not None and not has_buttons(card) and "Cancelled" in json.dumps(card)
    status = status_of(fake_slack, root)
    assert status["text"].startswith(":heavy_multiplication_x: Cancelled")
    assert not stop_button_shown(fake_slack, root)
    notices = [m["text"] for m in fake_slack.thread_messages(CHANNEL, root)]
    assert "<@U0DEV> stopped this run." in notices
    assert not fake_openai.streamed_requests()  # no answer was synthesised
    sessions = lambda: fake_slack.session_statuses(CHANNEL, root)  # noqa: E731
    await fake_slack.wait_for(lambda: sessions()[-1:] == ["closed"], 15)
    assert sessions()[:2] == ["processing", "suspended"]


async def test_only_requesters_and_approvers_may_stop(
    bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, database_url: str
) -> None:
    fake_openai.respond_with(restart_then_answer)
    root, _ = await waiting_run(bot, fake_slack)
    assert await bot.click(status_of(fake_slack, root), STOP_ACTION, user="U0EVE") == 200
    assert [r.status for r in runs(database_url)] == ["waiting_approval"]
    [note] = [e for e in fake_slack.ephemeral if e["user"] == "U0EVE"]
    assert "Only the people who asked" in note["text"]
    # an approver of the waiting call may stop it
    assert await bot.click(status_of(fake_slack, root), STOP_ACTION, user="U0LEAD") == 200
    await bot.wait_idle()
    assert [(r.status, r.stopped_by) for r in runs(database_url)] == [("cancelled", "U0LEAD")]


async def test_a_replier_may_stop_only_once_the_agent_has_read_the_reply(
    bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, ops_api: OpsAPI,
    database_url: str,
) -> None:  # fmt: skip
    """U0OPS replies while the run waits for approval: the reply is queued, not read (native
    mode reads replies after the tool results), so U0OPS's Stop is refused; once the approved
    call ran and the reply was handed to the model, U0OPS is a requester and the Stop holds.
    U0EVE, who never wrote, is refused throughout."""
    fake_openai.respond_with(restart_then_answer)
    root, card = await waiting_run(bot, fake_slack)
    assert await bot.send(message("also check the db", user="U0OPS", thread_ts=root)) == 200
    for user in ("U0OPS", "U0EVE"):
        assert await bot.click(status_of(fake_slack, root), STOP_ACTION, user=user) == 200
        [note] = [e for e in fake_slack.ephemeral if e["user"] == user]
        assert "Only the people who asked" in note["text"]
    assert [(r.status, r.stopped_by) for r in runs(database_url)] == [("waiting_approval", None)]
    fake_openai.hold()  # the model's next call (which reads the reply) waits here
    try:
        assert await bot.click(card, APPROVE_ACTION, user="U0LEAD") == 200
        await fake_openai.wait_for_requests(2, 15)
        last = fake_openai.requests[-1]["messages"][-1]["content"]
        assert last.startswith("[USER INTERRUPT]") and "also check the db" in last
        assert await bot.click(status_of(fake_slack, root), STOP_ACTION, user="U0EVE") == 200
        assert [r.stopped_by for r in runs(database_url)] == [None]
        assert await bot.click(status_of(fake_slack, root), STOP_ACTION, user="U0OPS") == 200
    finally:
        fake_openai.release()
    await bot.wait_idle()
    assert [(r.status, r.stopped_by) for r in runs(database_url)] == [("cancelled", "U0OPS")]
    assert ops_api.restarts == ["api"]  # approved before the stop: it ran, once


async def test_a_forged_stop_names_nothing_but_the_message_it_was_made_on(
    bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, database_url: str
) -> None:
    """A click claiming another message (the approval card) stops nothing; a Stop button
    whose value names another thread's run stops only the run of the message clicked."""
    fake_openai.respond_with(restart_then_answer)
    root_a, card_a = await waiting_run(bot, fake_slack)
    root_b, _ = await waiting_run(bot, fake_slack)
    status_a, status_b = status_of(fake_slack, root_a), status_of(fake_slack, root_b)
    on_the_card = block_actions(status_a, STOP_ACTION, user="U0DEV", message_ts=card_a["ts"])
    assert await bot.send(on_the_card) == 200
    assert [r.status for r in runs(database_url)] == ["waiting_approval"] * 2
    run_b = next(r for r in runs(database_url) if r.status_message_id == status_b["ts"])
    forged = json.loads(json.dumps(status_a))
    for block in forged["blocks"]:
        for element in block.get("elements", []):
            if element.get("action_id") == STOP_ACTION:
                element["value"] = run_b.id
    assert await bot.click(forged, STOP_ACTION, user="U0DEV") == 200
    stopped = "<@U0DEV> stopped this run."
    await fake_slack.wait_for(lambda: stopped in texts(fake_slack, root_a), 15)
    by_status = {r.status_message_id: r.status for r in runs(database_url)}
    assert by_status == {status_a["ts"]: "cancelled", status_b["ts"]: "waiting_approval"}
    assert stopped not in texts(fake_slack, root_b)


async def test_slacks_own_stop_ends_the_run_and_the_model_call_in_flight(
    bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, database_url: str
) -> None:
    fake_openai.script(answer("still thinking"))
    fake_openai.hold()  # the model is thinking when the stop comes
    event = mention("what is going on?", user="U0DEV")
    root = event["event"]["ts"]
    assert await bot.send(event) == 200
    await fake_openai.wait_for_requests(1)
    await fake_slack.wait_for(lambda: fake_slack.session_statuses(CHANNEL, root), 15)
    stranger = session_stopped(user="U0EVE", thread_ts=root)
    assert await bot.send(stranger) == 200
    assert [r.status for r in runs(database_url)] == ["running"]
    assert await bot.send(session_stopped(user="U0DEV", thread_ts=root)) == 200
    await bot.wait_idle()
    fake_openai.release()
    [run] = runs(database_url)
    assert (run.status, run.stopped_by) == ("cancelled", "U0DEV")
    assert len(fake_openai.requests) == 1  # the call in flight was abandoned, none followed
    sessions = lambda: fake_slack.session_statuses(CHANNEL, root)  # noqa: E731
    await fake_slack.wait_for(lambda: sessions() == ["processing", "closed"], 15)


async def test_a_tool_already_running_finishes_but_its_result_is_not_read(
    bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, ops_api: OpsAPI,
    database_url: str,
) -> None:  # fmt: skip
    fake_openai.respond_with(restart_then_answer)
    root, card = await waiting_run(bot, fake_slack)
    ops_api.hold()  # the restart reaches the ops API and hangs there
    assert await bot.click(card, "chatops_approve", user="U0LEAD") == 200
    await ops_api.wait_for(lambda: ops_api.restarts == ["api"])
    assert await bot.click(status_of(fake_slack, root), STOP_ACTION, user="U0DEV") == 200
    ops_api.release()
    await bot.wait_idle()
    [run] = runs(database_url)
    assert run.status == "cancelled"
    with Session(create_engine(database_url)) as session:
        [row] = session.exec(select(CallLog)).all()
    assert row.result_status == "ok"  # the call finished and its outcome is logged
    loop_calls = [b for b in fake_openai.requests if not b.get("stream")]
    assert len(loop_calls) == 1 and not fake_openai.streamed_requests()  # never read


async def test_feedback_is_one_changeable_row_per_person_and_only_on_an_answer(
    bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, database_url: str
) -> None:
    fake_openai.respond_with(
        lambda body: answer("All quiet.") if body.get("stream") else answer("nothing to do")
    )
    event = mention("how are things?", user="U0DEV")
    root = event["event"]["ts"]
    assert await bot.send(event) == 200
    await bot.wait_idle()
    [status, reply] = fake_slack.thread_messages(CHANNEL, root)
    assert reply["blocks"][-1]["type"] == "context_actions"
    assert await bot.send(feedback_click(reply, "up", user="U0DEV")) == 200
    assert await bot.send(feedback_click(reply, "down", user="U0DEV")) == 200  # changed
    assert await bot.send(feedback_click(reply, "up", user="U0LEAD")) == 200
    forged = feedback_click(reply, "down", user="U0EVE", message_ts=status["ts"])
    assert await bot.send(forged) == 200  # claims the status message: no answer there
    [run] = runs(database_url)
    assert run.answer_message_id == reply["ts"]
    assert feedback(database_url) == [("U0DEV", "down"), ("U0LEAD", "up")]


async def test_a_workspace_without_plans_or_sessions_gets_the_classic_status(
    bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, caplog, database_url: str
) -> None:
    fake_slack.refuse_block_type("plan")
    fake_slack.turn_off("agents.sessions.setStatus", "feature_disabled")
    fake_openai.script(tool_call("ops__get_service", {"name": "api"}), answer("api degraded"))
    fake_openai.respond_with(lambda body: answer("The api is degraded."))
    caplog.set_level("WARNING", logger="bot.surfaces.slack.features")
    event = mention("how is the api?", user="U0DEV")
    root = event["event"]["ts"]
    assert await bot.send(event) == 200
    await bot.wait_idle()
    status = status_of(fake_slack, root)
    assert status["text"].startswith(":white_check_mark: Done")
    assert all(b["type"] != "plan" for b in status["blocks"])
    assert "`ops__get_service`" in json.dumps(status["blocks"])
    assert len(fake_slack.calls("agents.sessions.setStatus")) == 1  # tried once
    assert [r.status for r in runs(database_url)] == ["done"]
    logged = [r.getMessage() for r in caplog.records]
    assert sum("plan blocks" in line for line in logged) == 1
    assert sum("agent session" in line for line in logged) == 1


async def test_an_app_not_subscribed_to_slacks_stop_is_told_in_the_log_once(
    bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, caplog
) -> None:
    """Slack warns (missing_agent_session_stopped_event_subscription) that its own stop button
    would do nothing: the operator reads it once, the sessions go on."""
    fake_slack.stop_events_subscribed = False
    fake_openai.respond_with(lambda body: answer("All quiet."))
    caplog.set_level("WARNING", logger="bot.surfaces.slack.sessions")
    roots = []
    for _ in range(2):
        event = mention("how are things?", user="U0DEV")
        roots.append(event["event"]["ts"])
        assert await bot.send(event) == 200
        await bot.wait_idle()
    for root in roots:
        await fake_slack.wait_for(
            lambda r=root: fake_slack.session_statuses(CHANNEL, r)[-1:] == ["closed"], 15
        )
    warned = [r for r in caplog.records if "agent_session_stopped" in r.getMessage()]
    assert len(warned) == 1
