"""Console threads are kept server-side and the event stream resumes exactly: every message (the
user's too) in server order, a thread that reloads as it was, `Last-Event-ID` replay with no gap
and no repeat (across a restart, and from a second app on the same PostgreSQL database), a
message sent twice counted once, and an answer streaming during a reconnect (the real app, the
fake model, the fake ops API; SQLite and PostgreSQL)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from py_mini_racer import MiniRacer
from sqlmodel import Session, select

from bot.chat.threads import ThreadRef
from bot.engine.events import AnswerDelta, AnswerStart
from bot.server import RUNTIME_KEY
from bot.storage.models import ConsoleItem, Message, Run
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.ops_api import OpsAPI, restart_then_answer
from tests.server.console_page import as_classic_script
from tests.server.sse import EventReader, item_is


@pytest.fixture
async def client(app_for) -> AsyncIterator[TestClient]:
    yield await app_for()


async def ask(client: TestClient, text: str, **body: Any) -> dict[str, Any]:
    payload = {"text": text, "user": "dev", **body}
    response = await client.post("/console/api/messages", json=payload)
    assert response.status in (200, 202), await response.text()
    return await response.json()


async def thread_of(client: TestClient, root: str) -> dict[str, Any]:
    response = await client.get(f"/console/api/threads/{root}")
    assert response.status == 200
    return await response.json()


pending_card = item_is("approval", "pending")
final_status = item_is("status", "done")


def in_order(reader: EventReader) -> bool:
    """Items come in event order, each event once; a run's live events keep the id of the
    last item before them."""
    ids = [f.id for f in reader.frames]
    items = [f.id for f in reader.frames if f.event == "item"]
    return ids == sorted(ids) and items == sorted(set(items))


def rows(client: TestClient, model: type) -> list[Any]:
    assert client.app is not None
    with Session(client.app[RUNTIME_KEY].engine) as session:
        return list(session.exec(select(model)).all())


async def test_every_message_is_kept_in_order_and_the_thread_reloads_exactly(
    client: TestClient, fake_openai: FakeOpenAI, ops_api: OpsAPI
) -> None:
    fake_openai.respond_with(restart_then_answer)
    events = await EventReader(client).start()
    try:
        sent = await ask(client, "please restart api")
        assert sent["outcome"] == "started"
        card = await events.wait_for(pending_card)
        decided = await client.post(
            f"/console/api/approvals/{card.data['data']['approval_id']}",
            json={"decision": "approve", "user": "lead"},
        )
        assert decided.status == 200
        await events.wait_for(final_status)
    finally:
        await events.close()
    assert ops_api.restarts == ["api"]

    shown = await thread_of(client, sent["thread"])
    kinds = [item["kind"] for item in shown["items"]]
    assert kinds == ["message", "status", "approval", "answer"]  # the request first
    mine = shown["items"][0]
    assert mine["id"] == sent["id"]
    assert mine["data"] == {"text": "please restart api", "author": "dev", "outcome": "started"}
    assert [i["position"] for i in shown["items"]] == sorted(i["position"] for i in shown["items"])
    # the thread as loaded is the stream's latest state of each item, nothing more or less
    latest = {item["id"]: item for item in events.items()}
    assert {i["id"]: (i["seq"], i["data"]) for i in shown["items"]} == {
        i["id"]: (i["seq"], i["data"]) for i in latest.values()
    }
    assert shown["thread"]["title"] == "please restart api"
    assert shown["thread"]["state"] == "done" and shown["thread"]["pending"] == 0
    answer = shown["items"][3]["data"]
    assert "<h2>Restarted</h2>" in answer["html"] and answer["markdown"].startswith("## ")
    listed = await (await client.get("/console/api/threads")).json()
    assert [t["root"] for t in listed["threads"]] == [sent["thread"]]  # not the approvals view


async def test_a_stream_resumes_after_its_last_event_without_gaps_or_repeats(
    client: TestClient, fake_openai: FakeOpenAI, ops_api: OpsAPI
) -> None:
    """A browser whose connection drops while the card waits misses the approval, the
    status edits and the answer; reconnecting with its last event id, it gets each of those
    once, in its latest state, in event order, then the live stream."""
    fake_openai.respond_with(restart_then_answer)
    first = await EventReader(client).start()
    sent = await ask(client, "please restart api")
    card = await first.wait_for(pending_card)
    await first.close()  # the network drops here
    seen = first.last_id

    await client.post(
        f"/console/api/approvals/{card.data['data']['approval_id']}",
        json={"decision": "approve", "user": "lead"},
    )
    await ops_api.wait_for(lambda: ops_api.restarts == ["api"])
    assert client.app is not None
    await client.app[RUNTIME_KEY].run_manager.wait_idle(15)
    shown = await thread_of(client, sent["thread"])

    second = await EventReader(client, last_event_id=seen).start()
    try:
        await second.wait_for(lambda f: f.id == shown["cursor"])
        replayed = second.items()
        assert in_order(second)
        assert all(f.id > seen for f in second.frames)  # nothing it had already
        assert len({i["id"] for i in replayed}) == len(replayed)  # each item once
        # together, the two connections hold every item at its latest state: no gap
        held = {i["id"]: i for i in first.items()} | {i["id"]: i for i in replayed}
        assert {k: v["seq"] for k, v in held.items()} == {i["id"]: i["seq"] for i in shown["items"]}
        assert "answer" in {i["kind"] for i in replayed}
        # then live: a new message arrives as the very next event
        await ask(client, "thanks", thread=sent["thread"])
        live = await second.wait_for(lambda f: f.event == "item" and f.data["kind"] == "message"
                                     and f.data["data"]["text"] == "thanks")  # fmt: skip
        assert live.id == shown["cursor"] + 1
    finally:
        await second.close()


async def test_an_event_id_from_elsewhere_resyncs_and_garbage_is_ignored(
    client: TestClient, fake_openai: FakeOpenAI
) -> None:
    beyond = await EventReader(client, last_event_id=10**9).start()
    try:
        resync = await beyond.wait_for(lambda f: f.event == "resync")
        assert resync.id == resync.data["cursor"] == 0
    finally:
        await beyond.close()
    for garbage in ("-5", "abc", "1e3", "9" * 40, ""):
        reader = await EventReader(client, last_event_id=garbage).start()
        await reader.close()


async def test_a_message_sent_twice_is_taken_once(
    client: TestClient, fake_openai: FakeOpenAI
) -> None:
    """The page resends with the same `client_id` when a response is lost: the second time
    starts nothing, stores nothing and changes no item."""
    fake_openai.respond_with(restart_then_answer)
    sent = await ask(client, "please restart api", client_id="c0ffee-0001")
    again = await client.post(
        "/console/api/messages",
        json={"text": "please restart api", "user": "dev", "client_id": "c0ffee-0001"},
    )
    assert again.status == 200
    assert await again.json() == {"thread": sent["thread"], "outcome": "duplicate",
                                  "id": "m-c0ffee-0001"}  # fmt: skip
    assert len(rows(client, Message)) == 1 and len(rows(client, Run)) == 1
    assert len([i for i in rows(client, ConsoleItem) if i.kind == "message"]) == 1
    for bad in ("short", "has space in it", "x" * 65, 42):
        refused = await client.post("/console/api/messages", json={"text": "hi", "client_id": bad})
        assert refused.status == 400
    assert len(rows(client, Message)) == 1


async def test_only_known_conversations_can_be_continued(client: TestClient) -> None:
    for thread in ("approvals", "0" * 32, "../etc", 7, ["x"]):
        response = await client.post(
            "/console/api/messages", json={"text": "hi", "thread": thread, "user": "dev"}
        )
        assert response.status == 404, thread
    assert rows(client, ConsoleItem) == [] and rows(client, Message) == []
    assert (await client.get("/console/api/threads/approvals")).status == 404
    assert (await client.get("/console/api/threads/" + "0" * 32)).status == 404


async def test_a_reconnect_during_an_answer_gets_the_text_so_far(client: TestClient) -> None:
    """The run's events are live only; a browser that connects while an answer streams gets it
    as one `reset` with the text so far, then the deltas after it: no gap, no repeat."""
    assert client.app is not None
    surface = client.app[RUNTIME_KEY].run_manager.surfaces()["console"]
    thread = ThreadRef("console", "local", "console", "a" * 32)
    for event in (AnswerStart(), AnswerDelta("Hello "), AnswerDelta("wor")):
        await surface.on_run_event("run-1", thread, event)  # type: ignore[attr-defined]
    reader = await EventReader(client).start()
    try:
        reset = await reader.wait_for(lambda f: f.event == "answer")
        assert reset.data == {"status": "reset", "content": "Hello wor", "run_id": "run-1",
                              "thread": "a" * 32, "html": "<p>Hello wor</p>\n"}  # fmt: skip
        await surface.on_run_event("run-1", thread, AnswerDelta("ld"))  # type: ignore[attr-defined]
        await reader.wait_for(lambda f: f.data.get("content") == "ld")
    finally:
        await reader.close()
    ctx = MiniRacer()  # the page's own store, fed what the browser got
    ctx.eval(as_classic_script("store.js") + "\nconst store = new Store();")
    for frame in reader.frames:
        ctx.eval(f"store.runEvent({json.dumps(frame.event)}, {json.dumps(frame.data)})")
    assert ctx.eval(f"store.live.get({json.dumps('a' * 32)})") == "<p>Hello world</p>\n"


async def test_the_event_id_survives_a_restart(
    app_for, fake_openai: FakeOpenAI, ops_api: OpsAPI
) -> None:
    fake_openai.respond_with(restart_then_answer)
    first = await app_for()
    events = await EventReader(first).start()
    sent = await ask(first, "please restart api")
    card = await events.wait_for(pending_card)
    seen = events.last_id
    await events.close()
    await first.close()  # the bot stops while the card waits

    second = await app_for()  # a new process on the same database
    shown = await thread_of(second, sent["thread"])
    assert [i["kind"] for i in shown["items"]] == ["message", "status", "approval"]
    assert shown["cursor"] >= seen and shown["thread"]["pending"] == 1
    resumed = await EventReader(second, last_event_id=seen).start()
    try:
        decided = await second.post(
            f"/console/api/approvals/{card.data['data']['approval_id']}",
            json={"decision": "approve", "user": "lead"},
        )
        assert decided.status == 200
        await resumed.wait_for(final_status, 30)
        first_item = next(f for f in resumed.frames if f.event == "item")
        assert first_item.id > seen and in_order(resumed)  # the items' numbering went on
        assert ops_api.restarts == ["api"]
    finally:
        await resumed.close()


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
async def test_a_second_process_sees_the_first_ones_items(
    app_for, fake_openai: FakeOpenAI, ops_api: OpsAPI
) -> None:
    """Two apps on one PostgreSQL database, as two processes behind a load balancer: a browser
    following the second sees what the first posts (its stream asks the store now and then)."""
    fake_openai.respond_with(restart_then_answer)
    one, two = await app_for(), await app_for()
    watching = await EventReader(two).start()
    try:
        sent = await ask(one, "please restart api")
        card = await watching.wait_for(pending_card, 30)
        assert card.data["thread"] == sent["thread"]
        kinds = [f.data["kind"] for f in watching.frames if f.event == "item"]
        assert kinds[0] == "message"
        assert in_order(watching)
    finally:
        await watching.close()
