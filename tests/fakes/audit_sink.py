"""A SIEM's intake on 127.0.0.1: takes signed JSON-lines batches, and can be down for a while.

It checks every batch's HMAC (`X-Chatops-Signature` over `<timestamp>.<body>`) and records only
verified events, in arrival order. Faults are data: `fail_next(n, status=503)` answers the
next n batches with an error, `go_down()` closes the port (connection refused) until `come_up()`.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
from collections.abc import Callable
from typing import Any

from aiohttp import web

SIGNATURE_HEADER = "X-Chatops-Signature"
TIMESTAMP_HEADER = "X-Chatops-Timestamp"


class FakeAuditSink:
    def __init__(self, secret: str) -> None:
        self._secret = secret.encode()
        self.events: list[dict[str, Any]] = []
        self.batches = 0  # batches taken
        self.refused = 0  # batches answered with an error
        self.bad_signatures = 0
        self._failures: list[int] = []
        self._app = web.Application()
        self._app.router.add_post("/intake", self._intake)
        self._runner: web.AppRunner | None = None
        self.port = 0
        self.changed = asyncio.Condition()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/intake"

    async def start(self) -> FakeAuditSink:
        self._runner = web.AppRunner(self._app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port, reuse_address=True)
        await site.start()
        if not self.port:
            self.port = self._runner.addresses[0][1]
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def go_down(self) -> None:
        """Close the port: deliveries are refused until `come_up()`."""
        await self.stop()

    async def come_up(self) -> None:
        await self.start()

    def fail_next(self, count: int, *, status: int = 503) -> None:
        self._failures.extend([status] * count)

    async def wait_for(self, predicate: Callable[[], bool], timeout: float = 20) -> None:  # noqa: ASYNC109
        async def _wait() -> None:
            async with self.changed:
                await self.changed.wait_for(predicate)

        await asyncio.wait_for(_wait(), timeout)

    def uids(self) -> list[str]:
        return [event["metadata"]["uid"] for event in self.events]

    async def _intake(self, request: web.Request) -> web.Response:
        body = await request.read()
        timestamp = request.headers.get(TIMESTAMP_HEADER, "")
        expected = (
            "sha256="
            + hmac.new(self._secret, timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
        )
        async with self.changed:
            if not hmac.compare_digest(expected, request.headers.get(SIGNATURE_HEADER, "")):
                self.bad_signatures += 1
                self.changed.notify_all()
                return web.Response(status=401, text="bad signature")
            if self._failures:
                self.refused += 1
                self.changed.notify_all()
                return web.Response(status=self._failures.pop(0), text="down")
            assert request.content_type == "application/x-ndjson"
            self.events.extend(json.loads(line) for line in body.decode().splitlines())
            self.batches += 1
            self.changed.notify_all()
        return web.Response(status=204)
