"""A raw reader of the console's event stream: every frame with its `id:`, as a browser gets it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiohttp.test_utils import TestClient


@dataclass(frozen=True)
class Frame:
    id: int
    event: str
    data: dict[str, Any]


class EventReader:
    """Reads `/console/api/events` (optionally resuming after `last_event_id`) into `frames`."""

    def __init__(
        self,
        client: TestClient,
        *,
        last_event_id: str | int | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.client = client
        self.headers = dict(headers or {})
        if last_event_id is not None:
            self.headers["Last-Event-ID"] = str(last_event_id)
        self.frames: list[Frame] = []
        self.raw = b""
        self._changed = asyncio.Condition()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> EventReader:
        response = await self.client.get("/console/api/events", headers=self.headers)
        assert response.status == 200
        self._task = asyncio.create_task(self._read(response))
        return self

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
                assert len(lines) == 3, f"an id, an event and a data line per frame: {block!r}"
                assert lines[0].startswith("id: ") and lines[0][4:].isdigit(), block
                assert lines[1].startswith("event: ") and lines[2].startswith("data: "), block
                frame = Frame(int(lines[0][4:]), lines[1][7:], json.loads(lines[2][6:]))
                async with self._changed:
                    self.frames.append(frame)
                    self._changed.notify_all()

    async def wait_for(self, predicate: Callable[[Frame], bool], within: float = 15) -> Frame:
        async def wait() -> Frame:
            async with self._changed:
                await self._changed.wait_for(lambda: any(map(predicate, self.frames)))
                return next(f for f in self.frames if predicate(f))

        return await asyncio.wait_for(wait(), within)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def items(self) -> list[dict[str, Any]]:
        return [f.data for f in self.frames if f.event == "item"]

    def run(self, thread: str) -> list[tuple[str, dict[str, Any]]]:
        """The run-event frames of one thread, as (channel, data), without the items."""
        return [(f.event, f.data) for f in self.frames
                if f.event != "item" and f.data.get("thread") == thread]  # fmt: skip

    @property
    def last_id(self) -> int:
        return self.frames[-1].id if self.frames else 0


def item_is(kind: str, state: str) -> Callable[[Frame], bool]:
    """A predicate: an `item` frame of this kind in this state."""

    def match(frame: Frame) -> bool:
        return (
            frame.event == "item" and frame.data["kind"] == kind and (frame.data["state"] == state)
        )

    return match
