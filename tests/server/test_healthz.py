"""`GET /healthz` checks the database: 200 while PostgreSQL answers, 503 once it is gone."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Coroutine
from typing import Any

import pytest
from sqlalchemy.engine import make_url

from bot.server import RUNTIME_KEY, create_app


class TcpProxy:
    """Forwards 127.0.0.1:<port> to a target; `cut()` drops every connection and stops listening.

    It runs its own event loop in a thread: the app under test may touch the database from its
    event loop synchronously (APScheduler's job store does), which must not stall the proxy.
    """

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        self._thread.start()
        await self._call(self._listen())

    async def cut(self) -> None:
        if self._loop.is_running():
            await self._call(self._cut())

    async def close(self) -> None:
        await self.cut()
        self._loop.call_soon_threadsafe(self._loop.stop)
        await asyncio.to_thread(self._thread.join, 10)
        self._loop.close()

    async def _call(self, coro: Coroutine[Any, Any, None]) -> None:
        await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self._loop))

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _cut(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for writer in list(self._writers):
            writer.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self.target)
        self._writers.update((writer, up_writer))
        pipes = [
            asyncio.create_task(self._pipe(reader, up_writer)),
            asyncio.create_task(self._pipe(up_reader, writer)),
        ]
        self._tasks.update(pipes)

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.CancelledError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        writer.close()


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
async def test_healthz_follows_the_database(database_url, make_settings, aiohttp_client) -> None:
    url = make_url(database_url)
    proxy = TcpProxy(url.host or "127.0.0.1", url.port or 5432)
    await proxy.start()
    proxied = url.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
    try:
        app = create_app(make_settings(database_url=proxied))
        client = await aiohttp_client(app)
        await app[RUNTIME_KEY].recovery.wait(30)  # (while it runs, the body says recovering)
        ok = await client.get("/healthz")
        assert ok.status == 200
        body = await ok.json()
        assert body.pop("loop_lag_ms")["samples"] >= 0
        assert body == {"ok": True}

        await proxy.cut()
        down = await client.get("/healthz")
        assert down.status == 503
        body = await down.json()
        assert body["ok"] is False
        assert "loop_lag_ms" in body  # the loop is fine; the database is not
    finally:
        await proxy.close()
