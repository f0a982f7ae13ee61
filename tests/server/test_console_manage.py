"""Rename and delete of console conversations through the real routes (SQLite and PostgreSQL):
guarded like every console POST (JSON only, same origin), a rename is told to open pages at
once, a delete hides the conversation (not listed, not opened, no new message into it) while
its items, runs and call-log rows stay in the database. And a thread's load says the asking
person's thumbs on its answers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from sqlmodel import Session, select

from bot.server import RUNTIME_KEY
from bot.storage.models import ConsoleItem, ConsoleThread, Run, RunFeedback
from bot.surfaces.console.manage import MAX_TITLE_CHARS
from tests.fakes.openai_server import FakeOpenAI, answer
from tests.server.sse import EventReader, item_is

pytestmark = pytest.mark.both_databases


@pytest.fixture
async def client(app_for) -> AsyncIterator[TestClient]:
    yield await app_for()


def rows(client: TestClient, model: type) -> list[Any]:
    assert client.app is not None
    with Session(client.app[RUNTIME_KEY].engine) as session:
        return list(session.exec(select(model)).all())


async def answered(client: TestClient, fake_openai: FakeOpenAI, text: str) -> str:
    """A conversation whose run has answered; its root."""
    fake_openai.respond_with(lambda body: answer("done"))
    reader = await EventReader(client).start()
    try:
        response = await client.post("/console/api/messages", json={"text": text, "user": "dev"})
        assert response.status == 202
        await reader.wait_for(item_is("status", "done"))
    finally:
        await reader.close()
    return (await response.json())["thread"]


async def test_rename_and_delete(client: TestClient, fake_openai: FakeOpenAI) -> None:
    root = await answered(client, fake_openai, "check the api")
    base = f"/console/api/threads/{root}"
    form = await client.post(f"{base}/rename", data={"title": "x"})
    assert form.status == 415
    cross = await client.post(f"{base}/delete", json={}, headers={"Origin": "http://evil.example"})
    assert cross.status == 403
    assert (await client.post(f"{base}/rename", json={"title": "  "})).status == 400
    too_long = {"title": "x" * (MAX_TITLE_CHARS + 1)}
    assert (await client.post(f"{base}/rename", json=too_long)).status == 400
    assert (await client.post("/console/api/threads/approvals/delete", json={})).status == 404

    events = await EventReader(client).start()
    try:
        renamed = await client.post(f"{base}/rename", json={"title": "api  health\ncheck"})
        assert renamed.status == 200
        assert (await renamed.json())["thread"]["title"] == "api health check"
        frame = await events.wait_for(lambda f: f.event == "thread")
        assert frame.data["root"] == root and frame.data["title"] == "api health check"
    finally:
        await events.close()
    listed = await (await client.get("/console/api/threads")).json()
    assert [t["title"] for t in listed["threads"]] == ["api health check"]

    items_before = len(rows(client, ConsoleItem))
    deleted = await client.post(f"{base}/delete", json={})
    assert deleted.status == 200 and (await deleted.json())["thread"]["hidden"] is True
    assert (await client.post(f"{base}/delete", json={})).status == 404  # once
    listed = await (await client.get("/console/api/threads")).json()
    assert listed["threads"] == []
    assert (await client.get(base)).status == 404
    again = await client.post("/console/api/messages", json={"text": "hi", "thread": root})
    assert again.status == 404
    # hidden, not erased: the thread's row, its items and its run are all still there
    [thread] = rows(client, ConsoleThread)
    assert thread.hidden and thread.title == "api health check"
    assert len(rows(client, ConsoleItem)) == items_before
    assert len(rows(client, Run)) == 1


async def test_a_thread_says_the_viewers_ratings(
    client: TestClient, fake_openai: FakeOpenAI
) -> None:
    root = await answered(client, fake_openai, "how are things")
    thread = await (await client.get(f"/console/api/threads/{root}?user=dev")).json()
    [answer_item] = [i for i in thread["items"] if i["kind"] == "answer"]
    run_id = answer_item["data"]["feedback_run"]
    assert thread["ratings"] == {}
    rated = await client.post(f"/console/api/runs/{run_id}/feedback",
                              json={"rating": "down", "user": "dev"})  # fmt: skip
    assert rated.status == 202
    for _ in range(200):  # the click is applied from the inbox: wait (bounded) for it
        if rows(client, RunFeedback):
            break
        await asyncio.sleep(0.05)
    mine = await (await client.get(f"/console/api/threads/{root}?user=dev")).json()
    assert mine["ratings"] == {run_id: "down"}
    theirs = await (await client.get(f"/console/api/threads/{root}?user=someone")).json()
    assert theirs["ratings"] == {}
