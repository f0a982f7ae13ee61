"""The console's Stop and feedback routes, through the real app: a console run is stopped only
by its requesters or approvers, and only console runs; a rating is one changeable row per
person, counted once the run has an answer. The answer streams token by token on the SSE
`answer` channel before its item arrives."""

from __future__ import annotations

from typing import Any

from sqlmodel import Session, create_engine, select

from bot.server import RUNTIME_KEY
from bot.storage.models import Conversation, Run, RunFeedback
from tests.fakes.openai_server import FakeOpenAI, Turn, answer, tool_call
from tests.server.conftest import ConsoleClient, OpsAPI

ANSWER = "The api is healthy and nothing needs a restart."


def restart(body: dict[str, Any]) -> Turn:
    if body.get("stream"):
        return answer(ANSWER)
    if body["messages"][-1]["role"] == "tool":
        return answer("done")
    return tool_call("ops__restart", {"name": "api"}, id="call_restart")


async def post(console: ConsoleClient, path: str, body: dict[str, Any]) -> tuple[int, Any]:
    response = await console.client.post(f"/console/api{path}", json=body)
    return response.status, await response.json()


def runs(database_url: str) -> list[Run]:
    with Session(create_engine(database_url)) as session:
        return list(session.exec(select(Run)).all())


async def waiting_console_run(console: ConsoleClient) -> tuple[str, dict[str, Any]]:
    response = await console.send("restart the api", user="alice")
    thread = (await response.json())["thread"]
    await console.wait_item(lambda i: i["kind"] == "approval" and i["data"]["state"] == "pending")
    status = await console.wait_item(
        lambda i: i["kind"] == "status" and i["data"]["state"] == "waiting_approval"
    )
    return thread, status


async def test_a_console_run_is_stopped_by_its_requester_only(
    console: ConsoleClient, fake_openai: FakeOpenAI, ops_api: OpsAPI, database_url: str
) -> None:
    fake_openai.respond_with(restart)
    thread, status = await waiting_console_run(console)
    run_id = status["data"]["run_id"]
    assert run_id
    code, body = await post(console, f"/runs/{run_id}/stop", {"user": "mallory"})
    assert code == 403 and body["status"] == "refused"
    code, body = await post(console, "/runs/no-such-run/stop", {"user": "alice"})
    assert code == 404 and body["status"] == "not_found"
    code, body = await post(console, f"/runs/{run_id}/stop", {"user": "alice"})
    assert (code, body["status"]) == (202, "stopping")
    await console.wait_item(lambda i: i["kind"] == "status" and i["data"]["state"] == "cancelled")
    notice = await console.wait_item(lambda i: i["kind"] == "notice")
    assert notice["data"] == {"text": "stopped this run.", "mention": ["alice"]}
    card = await console.wait_item(lambda i: i["kind"] == "approval")
    assert card["data"]["state"] == "cancelled"
    assert ops_api.restarts == []
    code, body = await post(console, f"/runs/{run_id}/stop", {"user": "alice"})
    assert code == 409 and body["status"] == "not_running"
    [run] = runs(database_url)
    assert (run.status, run.stopped_by) == ("cancelled", "alice")


async def test_the_console_cannot_stop_another_platforms_run(
    console: ConsoleClient, database_url: str
) -> None:
    with Session(create_engine(database_url)) as session:
        conv = Conversation(platform="slack", workspace="T1", channel="C1", root="1.1")
        session.add(conv)
        session.flush()
        session.add(Run(id="slackrun", conversation_id=conv.id, status="waiting_approval"))
        session.commit()
    code, body = await post(console, "/runs/slackrun/stop", {"user": "alice"})
    assert code == 404 and body["status"] == "not_found"
    code, _ = await post(console, "/runs/slackrun/feedback", {"user": "alice", "rating": "up"})
    assert code == 202  # stored, then refused: not a console run with an answer
    # the console stopped nothing (the seeded run has no owner, so the app's recovery may
    # adopt it and, with no Slack surface here, fail it: that is not a stop)
    assert [(r.status, r.stopped_by) for r in runs(database_url)] in (
        [("waiting_approval", None)],
        [("failed", None)],
    )


async def test_the_answer_streams_then_is_rated_once_per_person(
    console: ConsoleClient, fake_openai: FakeOpenAI, database_url: str
) -> None:
    fake_openai.respond_with(lambda body: answer(ANSWER) if body.get("stream") else answer("ok"))
    response = await console.send("is the api healthy?", user="alice")
    thread = (await response.json())["thread"]
    item = await console.wait_item(lambda i: i["kind"] == "answer")
    deltas = [d["content"] for d in console.of_thread(thread, "answer") if d["status"] == "delta"]
    assert len(deltas) > 1 and "".join(deltas) == ANSWER  # token by token, before the item
    run_id = item["data"]["feedback_run"]
    for user, rating in (("alice", "up"), ("alice", "down"), ("bob", "up")):
        rated = {"user": user, "rating": rating}
        code, body = await post(console, f"/runs/{run_id}/feedback", rated)
        assert (code, body) == (202, {"status": "recorded"})
    code, _ = await post(console, f"/runs/{run_id}/feedback", {"user": "alice", "rating": "meh"})
    assert code == 400
    assert console.client.app is not None  # the inbox applies the stored ratings
    await console.client.app[RUNTIME_KEY].inbox.wait_idle(10)
    with Session(create_engine(database_url)) as session:
        rows = session.exec(select(RunFeedback).order_by(RunFeedback.user_id)).all()
        assert [(r.user_id, r.rating, r.platform) for r in rows] == [
            ("alice", "down", "console"),
            ("bob", "up", "console"),
        ]


async def test_a_console_replier_may_stop_only_once_the_run_read_the_reply(
    console: ConsoleClient, fake_openai: FakeOpenAI, ops_api: OpsAPI, database_url: str
) -> None:
    """carol replies while alice's run waits for approval: her reply is not read yet (it is read
    after the tool result), so her Stop is refused; once the model was handed it, it holds."""
    fake_openai.respond_with(restart)
    thread, status = await waiting_console_run(console)
    run_id = status["data"]["run_id"]
    await console.send("also check the db", thread=thread, user="carol")
    for user in ("carol", "mallory"):
        code, body = await post(console, f"/runs/{run_id}/stop", {"user": user})
        assert (code, body["status"]) == (403, "refused")
    card = await console.wait_item(lambda i: i["kind"] == "approval")
    fake_openai.hold()  # the call that reads carol's reply waits here
    try:
        response = await console.decide(card["data"]["approval_id"], "approve", user="bob")
        assert response.status == 200
        await fake_openai.wait_for_requests(2, 15)
        assert "also check the db" in fake_openai.requests[-1]["messages"][-1]["content"]
        code, body = await post(console, f"/runs/{run_id}/stop", {"user": "mallory"})
        assert (code, body["status"]) == (403, "refused")
        code, body = await post(console, f"/runs/{run_id}/stop", {"user": "carol"})
        assert (code, body["status"]) == (202, "stopping")
    finally:
        fake_openai.release()
    await console.wait_item(lambda i: i["kind"] == "status" and i["data"]["state"] == "cancelled")
    [run] = runs(database_url)
    assert (run.status, run.stopped_by) == ("cancelled", "carol")
    assert ops_api.restarts == ["api"]
