"""FakeHttpApi: a local REST API for connector tests (aiohttp on 127.0.0.1, port 0).

Every request is recorded (method, path, query pairs, headers, body). The body is parsed by its
Content-Type as a real API would: JSON, form fields (`application/x-www-form-urlencoded`, as
`(name, value)` pairs) or multipart fields (`(name, value)` pairs; a file part is refused with
400, as an API expecting plain fields would); a body that does not parse as its type is
answered 400. By default a request is answered with an echo of itself, so tests can see
exactly what a connector sent; scripted routes and faults (status, headers, redirects) are
data, consumed in order.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

from aiohttp import BodyPartReader, web

ENDLESS_LIMIT_BYTES = 1024**3


@dataclass(frozen=True)
class Recorded:
    method: str
    path: str
    query: list[tuple[str, str]]
    headers: dict[str, str]
    body: Any
    raw_path: str
    content_type: str = ""


@dataclass
class _Reply:
    status: int = 200
    body: Any = None
    text: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    fault: str = ""  # "hang": never answer (until stop); "disconnect": drop the connection;
    # "endless": stream `text` over and over until the client hangs up (at most 1 GiB)
    echo_path: bool = False  # append the request's raw path and query, as a 404 page does


class FakeHttpApi:
    """A scripted HTTP API; `fail_next`, `reply` and `redirect` queue answers per (method, path)."""

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self.endless_bytes_sent = 0
        self._queued: dict[tuple[str, str], list[_Reply]] = {}
        self._routes: dict[tuple[str, str], _Reply] = {}
        self._changed = asyncio.Condition()
        self._runner: web.AppRunner | None = None
        self._stopping = asyncio.Event()
        self.url = ""
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self.app = app

    async def start(self) -> None:
        self._runner = web.AppRunner(self.app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}"

    async def stop(self) -> None:
        self._stopping.set()
        if self._runner is not None:
            await self._runner.cleanup()

    # --- scripting ---------------------------------------------------------------------------

    def route(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        text: str | None = None,
        status: int = 200,
        headers: dict[str, str] | None = None,
        echo_path: bool = False,
    ) -> None:
        """A standing answer for every request to (method, path); `echo_path` appends the raw
        path and query string the client sent to `text` (an upstream repeating the URL)."""
        self._routes[(method.upper(), path)] = _Reply(
            status, json_body, text, dict(headers or {}), echo_path=echo_path
        )

    def endless(self, method: str, path: str, *, chunk: str, content_type: str) -> None:
        """Every request to (method, path) gets `chunk` repeated until the client stops reading
        and hangs up (bounded at 1 GiB); `endless_bytes_sent` counts what went out."""
        headers = {"Content-Type": content_type}
        self._routes[(method.upper(), path)] = _Reply(200, None, chunk, headers, fault="endless")

    def fail_next(
        self,
        method: str,
        path: str,
        *,
        status: int = 503,
        count: int = 1,
        headers: dict[str, str] | None = None,
        body: str = "unavailable",
    ) -> None:
        for _ in range(count):
            self._queued.setdefault((method.upper(), path), []).append(
                _Reply(status, None, body, dict(headers or {}))
            )

    def hang_next(self, method: str, path: str) -> None:
        """The next request to (method, path) gets no answer until the server stops."""
        self._queued.setdefault((method.upper(), path), []).append(_Reply(fault="hang"))

    def disconnect_next(self, method: str, path: str, *, count: int = 1) -> None:
        """The next `count` requests see the connection dropped before any response."""
        for _ in range(count):
            self._queued.setdefault((method.upper(), path), []).append(_Reply(fault="disconnect"))

    def redirect(self, method: str, path: str, location: str, *, status: int = 302) -> None:
        self._queued.setdefault((method.upper(), path), []).append(
            _Reply(status, None, "", {"Location": location})
        )

    # --- inspection --------------------------------------------------------------------------

    def calls(self, path: str | None = None, method: str | None = None) -> list[Recorded]:
        return [
            r
            for r in self.requests
            if (path is None or r.path == path) and (method is None or r.method == method.upper())
        ]

    async def wait_for(self, predicate: Callable[[], bool], timeout: float = 10) -> None:  # noqa: ASYNC109
        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(predicate), timeout)

    # --- serving -----------------------------------------------------------------------------

    async def _body(self, request: web.Request) -> Any:
        """The body as the Content-Type says; `web.HTTPBadRequest` when it does not parse."""
        kind = request.content_type if request.body_exists else ""
        if kind == "multipart/form-data":
            fields: list[tuple[str, str]] = []
            reader = await request.multipart()
            while (part := await reader.next()) is not None:
                if not isinstance(part, BodyPartReader) or part.filename is not None:
                    raise web.HTTPBadRequest(text="file parts are not accepted here")
                fields.append((part.name or "", await part.text()))
            return fields
        raw = await request.read()
        if kind == "application/x-www-form-urlencoded":
            try:
                return parse_qsl(raw.decode(), keep_blank_values=True, strict_parsing=bool(raw))
            except (UnicodeDecodeError, ValueError):
                raise web.HTTPBadRequest(text="malformed form body") from None
        if kind == "application/json":
            try:
                return json.loads(raw) if raw else None
            except ValueError:
                raise web.HTTPBadRequest(text="malformed JSON body") from None
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            return raw.decode(errors="replace")

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await self._body(request)
        record = Recorded(
            method=request.method,
            path=request.path,
            query=list(request.query.items()),
            headers=dict(request.headers),
            body=body,
            raw_path=request.raw_path,
            content_type=request.content_type if request.body_exists else "",
        )
        async with self._changed:
            self.requests.append(record)
            self._changed.notify_all()
        key = (request.method, request.path)
        queued = self._queued.get(key)
        reply = queued.pop(0) if queued else self._routes.get(key)
        if reply is not None and reply.fault == "hang":
            await self._stopping.wait()
            return web.Response(status=503)
        if reply is not None and reply.fault == "endless":
            return await self._stream_endlessly(request, reply)
        if reply is not None and reply.fault == "disconnect":
            assert request.transport is not None
            request.transport.abort()
            return web.Response(status=500)
        if reply is None:
            return web.json_response(
                {
                    "method": record.method,
                    "path": record.path,
                    "query": record.query,
                    "body": record.body,
                }
            )
        if reply.text is not None:
            text = reply.text + (request.raw_path if reply.echo_path else "")
            return web.Response(status=reply.status, text=text, headers=reply.headers)
        return web.json_response(reply.body, status=reply.status, headers=reply.headers)

    async def _stream_endlessly(self, request: web.Request, reply: _Reply) -> web.StreamResponse:
        response = web.StreamResponse(status=reply.status, headers=reply.headers)
        await response.prepare(request)
        chunk = (reply.text or "x").encode()
        try:
            while self.endless_bytes_sent < ENDLESS_LIMIT_BYTES:
                await response.write(chunk)
                self.endless_bytes_sent += len(chunk)
        except (ConnectionError, RuntimeError):
            pass  # the client hung up: what the test expects
        return response
