"""The console's event stream speaks the seed's SSE protocol, read raw over HTTP; the page's
handler (run in V8) replaces a broken answer stream with the fallback; an approval wait is not
counted by the run's time budget (the real gate, the real app, a clock moved by hand)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from py_mini_racer import MiniRacer

from bot.engine.protocol import CHANNELS
from bot.server import RUNTIME_KEY, create_app
from bot.surfaces.console.page import PAGE
from tests.fakes.openai_server import FakeOpenAI, Turn, answer, broken_stream, tool_call
from tests.server.conftest import ConsoleClient, OpsAPI, llm_settings

Frame = tuple[str, dict[str, Any]]


class RawEvents:
    """Reads `/console/api/events` as bytes and splits it into (event, data) frames."""

    def __init__(self, client: TestClient) -> None:
        self.client = client
        self.frames: list[Frame] = []
        self.raw = b""
        self._changed = asyncio.Condition()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        response = await self.client.get("/console/api/events")
        assert response.status == 200
        assert response.headers["Content-Type"] == "text/event-stream"
        self._task = asyncio.create_task(self._read(response))

    async def _read(self, response: Any) -> None:
        buffer = b""
        async for chunk in response.content.iter_any():
            self.raw += chunk
            buffer += chunk
            while b"\n\n" in buffer:
                block, buffer = buffer.split(b"\n\n", 1)
                lines = block.decode().split("\n")
                if lines[0].startswith(":"):
                    continue  # a heartbeat comment
                assert len(lines) == 2, f"one event and one data line per frame: {block!r}"
                assert lines[0].startswith("event: ") and lines[1].startswith("data: ")
                frame = (lines[0][7:], json.loads(lines[1][6:]))
                async with self._changed:
                    self.frames.append(frame)
                    self._changed.notify_all()

    async def wait_for(self, predicate: Callable[[Frame], bool], within: float = 10) -> Frame:
        async def wait() -> Frame:
            async with self._changed:
                await self._changed.wait_for(lambda: any(map(predicate, self.frames)))
                return next(f for f in self.frames if predicate(f))

        return await asyncio.wait_for(wait(), within)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def run(self, thread: str) -> list[Frame]:
        """The run-event frames of one thread, without the `item` frames."""
        return [(name, d) for name, d in self.frames if name != "item" and d["thread"] == thread]


@pytest.fixture
def app_for(
    make_settings, database_url, manifests_dir, fake_openai: FakeOpenAI, aiohttp_client
) -> Callable[..., Any]:
    async def build(**overrides: Any) -> TestClient:
        settings = make_settings(
            database_url=database_url,
            chatops_manifests_dir=manifests_dir,
            **llm_settings(fake_openai),
            **overrides,
        )
        return await aiohttp_client(create_app(settings))

    return build


@pytest.fixture
async def raw(app_for) -> AsyncIterator[tuple[TestClient, RawEvents]]:
    client = await app_for()
    events = RawEvents(client)
    await events.start()
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
    raw: tuple[TestClient, RawEvents], fake_openai: FakeOpenAI
) -> None:
    client, events = raw
    fake_openai.respond_with(status_then_answer(answer("The api service is healthy.")))
    thread = await _ask(client, "is the api healthy?")
    await events.wait_for(lambda f: f[0] == "done" and f[1]["thread"] == thread)
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


async def test_a_broken_answer_stream_is_replaced_on_the_console(
    raw: tuple[TestClient, RawEvents], fake_openai: FakeOpenAI
) -> None:
    client, events = raw
    partial = "The api servi"
    fake_openai.respond_with(status_then_answer(broken_stream(partial + "ce is fine.", after=1)))
    thread = await _ask(client, "is the api healthy?")
    await events.wait_for(lambda f: f[0] == "done" and f[1]["thread"] == thread)
    answer_frames = [d for name, d in events.run(thread) if name == "answer"]
    statuses = [d["status"] for d in answer_frames]
    assert statuses == ["start", "delta", "reset", "done"]
    assert answer_frames[1]["content"] == partial[:8]  # shown first ...
    assert answer_frames[2]["content"] == "api is healthy (loop answer)"  # ... then replaced
    item = await events.wait_for(lambda f: f[0] == "item" and f[1]["kind"] == "answer")
    assert item[1]["data"]["markdown"] == "api is healthy (loop answer)"

    # the page's own handler, fed the frames as read: it shows the fallback, not both texts
    shown = page_live_text([(n, d) for n, d in events.run(thread)], thread)
    assert shown == "api is healthy (loop answer)"


def page_live_text(frames: list[Frame], thread: str) -> str:
    """Run the console page's `runEvent` (from the served script) in V8 over `frames`."""
    script = PAGE.split("<script>", 1)[1].split("</script>", 1)[0]
    start = script.index("function runEvent(")
    end = script.index("\n}\n", start) + 3
    ctx = MiniRacer()
    ctx.eval(f"const live = new Map(); let thread = {json.dumps(thread)};\n{script[start:end]}")
    for name, data in frames:
        ctx.eval(f"runEvent({json.dumps(name)}, {json.dumps(data)})")
    return str(ctx.eval(f"live.get({json.dumps(thread)})"))


def test_the_page_appends_deltas_and_a_reset_replaces_them() -> None:
    frames: list[Frame] = [
        ("answer", {"status": "start", "thread": "t"}),
        ("answer", {"status": "delta", "content": "Hello ", "thread": "t"}),
        ("answer", {"status": "delta", "content": "wor", "thread": "t"}),
    ]
    assert page_live_text(frames, "t") == "Hello wor"
    reset = ("answer", {"status": "reset", "content": "Fallback.", "thread": "t"})
    assert page_live_text([*frames, reset], "t") == "Fallback."
    other = ("answer", {"status": "delta", "content": "elsewhere", "thread": "u"})
    assert page_live_text([*frames, reset, other], "t") == "Fallback."


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
