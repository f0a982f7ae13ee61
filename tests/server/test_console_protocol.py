"""The console's event stream speaks the seed's SSE protocol, read raw over HTTP; the page's
handler (run in V8) replaces a broken answer stream with the fallback; an approval wait is not
counted by the run's time budget (the real gate, the real app, a clock moved by hand)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from py_mini_racer import MiniRacer

from bot.engine.protocol import CHANNELS
from bot.server import RUNTIME_KEY
from tests.fakes.openai_server import FakeOpenAI, Turn, answer, broken_stream, tool_call
from tests.server.conftest import ConsoleClient, OpsAPI
from tests.server.console_page import as_classic_script
from tests.server.sse import EventReader

Frame = tuple[str, dict[str, Any]]  # (channel, data) of a run event


@pytest.fixture
async def raw(app_for) -> AsyncIterator[tuple[TestClient, EventReader]]:
    client = await app_for()
    events = await EventReader(client).start()
    try:
        yield client, events
    finally:
        await events.close()


def status_then_answer(synthesis: Turn) -> Callable[[dict[str, Any]], Turn]:
    def respond(body: dict[str, Any]) -> Turn:
        if body.get("stream"):
            return synthesis
        if any(m["role"] == "tool" for m in body["messages"]):
            return answer("api is healthy (loop answer)")
        return tool_call("ops__status", {"name": "api"}, id="call_status")

    return respond


async def _ask(client: TestClient, text: str) -> str:
    response = await client.post("/console/api/messages", json={"text": text, "user": "alice"})
    assert response.status == 202
    return (await response.json())["thread"]


async def test_the_event_stream_speaks_the_seed_protocol(
    raw: tuple[TestClient, EventReader], fake_openai: FakeOpenAI
) -> None:
    client, events = raw
    fake_openai.respond_with(status_then_answer(answer("The api service is healthy.")))
    thread = await _ask(client, "is the api healthy?")
    await events.wait_for(lambda f: f.event == "done" and f.data["thread"] == thread)
    frames = events.run(thread)
    assert {name for name, _ in frames} <= set(CHANNELS)
    steps = [(d["type"], d["status"]) for name, d in frames if name == "step"]
    assert steps == [
        ("thinking", "start"), ("thinking", "done"), ("iteration", "start"),
        ("iteration", "done"), ("thinking", "start"), ("thinking", "done"), ("answer", "start"),
    ]  # fmt: skip
    start = next(d for name, d in frames if name == "step" and d["type"] == "iteration")
    shown = (start["iteration"], start["tool_name"], start["tool_args"])
    assert shown == (1, "ops__status", {"name": "api"})
    done = [d for name, d in frames if name == "step" and d["type"] == "iteration"][1]
    assert set(done) >= {"iteration", "tool_name", "observation", "error", "iter_elapsed"}
    answer_frames = [d for name, d in frames if name == "answer"]
    assert [d["status"] for d in answer_frames][0] == "start"
    assert [d["status"] for d in answer_frames][-1] == "done"
    assert "".join(d.get("content", "") for d in answer_frames) == "The api service is healthy."
    name, final = frames[-1]
    assert name == "done" and final["answer"] == "The api service is healthy."
    assert final["iterations"] == 2 and final["elapsed"] >= 0
    assert set(final["usage"]) == {"prompt_tokens", "completion_tokens", "total_tokens"}
    # the channel order of the seed's sequence diagram: steps, then the answer, then done
    order = [name for name, _ in frames]
    assert order.index("answer") > max(i for i, n in enumerate(order) if n == "step")
    assert b"event: step\ndata: {" in events.raw and b"event: done\ndata: {" in events.raw
    # every frame has an id; items move it on by one event each, run events keep it
    ids = [f.id for f in events.frames]
    item_ids = [f.id for f in events.frames if f.event == "item"]
    assert ids == sorted(ids) and item_ids == list(range(item_ids[0], item_ids[0] + len(item_ids)))


async def test_a_broken_answer_stream_is_replaced_on_the_console(
    raw: tuple[TestClient, EventReader], fake_openai: FakeOpenAI
) -> None:
    client, events = raw
    partial = "The api servi"
    fake_openai.respond_with(status_then_answer(broken_stream(partial + "ce is fine.", after=1)))
    thread = await _ask(client, "is the api healthy?")
    await events.wait_for(lambda f: f.event == "done" and f.data["thread"] == thread)
    answer_frames = [d for name, d in events.run(thread) if name == "answer"]
    statuses = [d["status"] for d in answer_frames]
    assert statuses == ["start", "delta", "reset", "done"]
    assert answer_frames[1]["content"] == partial[:8]  # shown first ...
    assert answer_frames[2]["content"] == "api is healthy (loop answer)"  # ... then replaced
    item = await events.wait_for(lambda f: f.event == "item" and f.data["kind"] == "answer")
    assert item.data["data"]["markdown"] == "api is healthy (loop answer)"

    # the page's own handler, fed the frames as read: it shows the fallback, not both texts
    # (each frame carries the text so far, rendered and sanitised by the server)
    assert answer_frames[2]["html"] == "<p>api is healthy (loop answer)</p>\n"
    shown = page_live_text([(n, d) for n, d in events.run(thread)], thread)
    assert shown == "<p>api is healthy (loop answer)</p>\n"


def page_live_text(frames: list[Frame], thread: str) -> str:
    """Run the console page's own store (static/store.js) in V8 over `frames`: the answer
    (its HTML so far) it would show for `thread`."""
    ctx = MiniRacer()
    ctx.eval(as_classic_script("store.js") + "\nconst store = new Store();")
    for name, data in frames:
        ctx.eval(f"store.runEvent({json.dumps(name)}, {json.dumps(data)})")
    return str(ctx.eval(f"store.live.get({json.dumps(thread)})"))


def test_the_page_shows_the_text_so_far_and_a_reset_replaces_it() -> None:
    frames: list[Frame] = [
        ("answer", {"status": "start", "thread": "t", "html": ""}),
        ("answer", {"status": "delta", "content": "Hello ", "thread": "t", "html": "<p>Hello</p>"}),
        (
            "answer",
            {"status": "delta", "content": "wor", "thread": "t", "html": "<p>Hello wor</p>"},
        ),
    ]
    assert page_live_text(frames, "t") == "<p>Hello wor</p>"
    reset = ("answer", {"status": "reset", "content": "Fallback.", "thread": "t",
                        "html": "<p>Fallback.</p>"})  # fmt: skip
    assert page_live_text([*frames, reset], "t") == "<p>Fallback.</p>"
    other = ("answer", {"status": "delta", "content": "elsewhere", "thread": "u", "html": "x"})
    assert page_live_text([*frames, reset, other], "t") == "<p>Fallback.</p>"


class ManualClock:
    def __init__(self) -> None:
        self.now = 50.0

    def __call__(self) -> float:
        return self.now


async def test_an_approval_wait_does_not_count_against_the_run_timeout(
    app_for, fake_openai: FakeOpenAI, ops_api: OpsAPI
) -> None:
    """The real approval gate: an hour on the card, a 100 s budget, 2 x 30 s of model work:
    the run answers; its `done` frame still reports the whole wall time."""
    clock = ManualClock()
    client = await app_for(react_run_timeout_s=100)
    client.app[RUNTIME_KEY].agent.clock = clock
    console = ConsoleClient(client)
    await console.start()
    try:

        def respond(body: dict[str, Any]) -> Turn:
            if body.get("stream"):
                return answer("Restarted api.")
            clock.now += 30  # the model thinks for 30 s
            if any(m["role"] == "tool" for m in body["messages"]):
                return answer("api restarted")
            return tool_call("ops__restart", {"name": "api"}, id="call_restart")

        fake_openai.respond_with(respond)
        sent = await (await console.send("restart api")).json()
        card = await console.wait_item(
            lambda i: i["kind"] == "approval" and i["data"]["state"] == "pending"
        )
        clock.now += 3600  # the approver takes an hour
        await console.decide(card["data"]["approval_id"], "approve", user="bob")
        item = await console.wait_item(lambda i: i["kind"] == "answer")
        assert item["data"]["markdown"] == "Restarted api." and ops_api.restarts == ["api"]
        await console.wait_item(lambda i: i["kind"] == "status" and i["data"]["state"] == "done")
        done = console.of_thread(sent["thread"], "done")
        assert done and done[0]["elapsed"] >= 3660
    finally:
        await console.close()
