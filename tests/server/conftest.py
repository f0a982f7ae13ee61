"""Fixtures for the server tests: a fake ops API with a manifest, settings, and a console client."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import ClientSession
from aiohttp.test_utils import TestClient

from bot.config import Settings
from bot.engine.protocol import CHANNELS
from bot.server import create_app
from tests.databases import sqlite_copy
from tests.fakes.fixtures import fake_openai  # noqa: F401
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.ops_api import (
    OpsAPI,
    ops_manifest,
)


@pytest.fixture
def manifests_dir(tmp_path: Path, ops_api: OpsAPI) -> Path:
    directory = tmp_path / "manifests"
    directory.mkdir()
    (directory / "ops.yaml").write_text(ops_manifest(ops_api.url))
    return directory


@pytest.fixture
def app_for(
    make_settings,
    database_url,
    manifests_dir,
    fake_openai: FakeOpenAI,  # noqa: F811
    aiohttp_client,
) -> Callable[..., Any]:
    """A console app on the test's database (call again: another process on the same one)."""

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
def make_settings(tmp_path: Path, sqlite_template: Path) -> Callable[..., Settings]:
    """Settings built from keyword arguments only (no `.env`); the database, unless given, is
    the test's own migrated SQLite file (one file for every call: a restart finds its data)."""
    database_url = sqlite_copy(sqlite_template, tmp_path, "bot-default.db")

    def build(**values: Any) -> Settings:
        values.setdefault("database_url", database_url)
        return Settings(_env_file=None, **values)

    return build


def llm_settings(fake: FakeOpenAI) -> dict[str, Any]:
    return {
        "openai_base_url": fake.base_url,
        "openai_api_key": "sk-test-not-a-secret",
        "chatops_model": "fake-model",
        "chatops_llm_max_retries": 0,
    }


class ConsoleClient:
    """Drives the console the way its page does: JSON POSTs and one SSE stream of items and
    run events (the seed's channels)."""

    def __init__(self, client: TestClient, *, headers: dict[str, str] | None = None) -> None:
        """`headers`: sent with every request (a public console's `Authorization`)."""
        self.client = client
        self.headers = dict(headers or {})
        self.items: dict[str, dict[str, Any]] = {}
        self.frames: list[tuple[str, dict[str, Any]]] = []  # run events: (channel, data)
        self._changed = asyncio.Condition()
        self._reader: asyncio.Task[None] | None = None
        self._session: ClientSession | None = None

    async def start(self) -> None:
        response = await self.client.get("/console/api/events", headers=self.headers)
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/event-stream")
        self._reader = asyncio.create_task(self._read(response))

    async def close(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            await asyncio.gather(self._reader, return_exceptions=True)

    async def _read(self, response: Any) -> None:
        event = ""
        async for raw in response.content:
            line = raw.decode().rstrip("\n")
            if line.startswith("event: "):
                event = line[len("event: ") :]
            elif line.startswith("data: ") and event == "item":
                item = json.loads(line[len("data: ") :])
                async with self._changed:
                    self.items[item["id"]] = item
                    self._changed.notify_all()
            elif line.startswith("data: ") and event in CHANNELS:
                self.frames.append((event, json.loads(line[len("data: ") :])))

    async def wait_item(
        self, predicate: Callable[[dict[str, Any]], bool], within: float = 10
    ) -> dict[str, Any]:
        """The first item (latest state) matching `predicate`, waiting for it to arrive."""

        def find() -> dict[str, Any] | None:
            return next((item for item in self.items.values() if predicate(item)), None)

        async def wait() -> dict[str, Any]:
            async with self._changed:
                await self._changed.wait_for(lambda: find() is not None)
                found = find()
                assert found is not None
                return found

        return await asyncio.wait_for(wait(), within)

    async def send(self, text: str, *, thread: str | None = None, user: str = "alice") -> Any:
        return await self.client.post(
            "/console/api/messages",
            json={"text": text, "thread": thread, "user": user},
            headers=self.headers,
        )

    async def decide(
        self, approval_id: str, decision: str, *, user: str = "alice", reason: str = ""
    ) -> Any:
        return await self.client.post(
            f"/console/api/approvals/{approval_id}",
            json={"decision": decision, "user": user, "reason": reason},
            headers=self.headers,
        )

    def of_thread(self, thread: str, channel: str | None = None) -> list[dict[str, Any]]:
        """The run-event frames of one thread (optionally one channel), in order."""
        return [
            data
            for name, data in self.frames
            if data.get("thread") == thread and (channel is None or name == channel)
        ]


@pytest.fixture
async def console(
    make_settings,
    database_url,
    manifests_dir,
    fake_openai: FakeOpenAI,  # noqa: F811
    aiohttp_client,
) -> AsyncIterator[ConsoleClient]:
    """The real app (the ops manifest, the fake model) driven through its console. The app
    stops before its database schema is dropped (fixtures end in reverse order)."""
    from bot.server import create_app

    settings = make_settings(
        database_url=database_url, chatops_manifests_dir=manifests_dir, **llm_settings(fake_openai)
    )
    client: TestClient = await aiohttp_client(create_app(settings))
    console = ConsoleClient(client)
    await console.start()
    try:
        yield console
    finally:
        await console.close()
