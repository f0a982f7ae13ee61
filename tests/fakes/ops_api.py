"""A tiny internal ops API on 127.0.0.1 (the system the agent drives in end-to-end tests),
its manifest, and the scripted model that restarts `api` and then answers."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Any

from aiohttp import web

from tests.fakes.openai_server import Turn, answer, tool_call

ANSWER = "## Restarted\n**api** is back. See [the runbook](https://runbooks.example/api)."

_MANIFEST = """\
name: ops
description: Internal ops API of the test
base_url: {url}
auth: {{type: none}}
actions:
  - name: get_service
    description: Show one service's status
    method: GET
    path: /services/{{name}}
    parameters: {{type: object, properties: {{name: {{type: string}}}}, required: [name]}}
  - name: restart
    description: Restart one service
    method: POST
    path: /services/{{name}}/restart
    parameters: {{type: object, properties: {{name: {{type: string}}}}, required: [name]}}
{approvers}    risk: high
"""


def ops_manifest(url: str, *, approvers: Sequence[str] = ()) -> str:
    """The ops connector's manifest: `restart` needs approval (by `approvers`, else anyone)."""
    listed = f"    approvers: [{', '.join(approvers)}]\n" if approvers else ""
    return _MANIFEST.format(url=url, approvers=listed)


class OpsAPI:
    """Records every request; `restarts` and `deleted` list the services, in order, and
    `restarted_at` when each restart arrived (`time.monotonic()`, for benches)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.restarts: list[str] = []
        self.restarted_at: list[float] = []
        self.deleted: list[str] = []
        self.extra: dict[str, Any] = {}  # merged into every GET's answer (e.g. a leaked token)
        # service name -> (status, text): its GET fails with them (every time, retries too)
        self.broken: dict[str, tuple[int, str]] = {}
        self._app = web.Application()
        self._app.router.add_get("/services/{name}", self._get)
        self._app.router.add_post("/services/{name}/restart", self._restart)
        self._app.router.add_post("/services/{name}/delete", self._delete)
        self._runner = web.AppRunner(self._app)
        self.url = ""
        self.received = asyncio.Condition()
        self._gate = asyncio.Event()
        self._gate.set()

    def hold(self) -> None:
        """Requests are recorded (the system acted) but not answered until `release()`."""
        self._gate.clear()

    def release(self) -> None:
        self._gate.set()

    async def wait_for(self, predicate: Callable[[], bool], timeout: float = 15) -> None:  # noqa: ASYNC109
        async def _wait() -> None:
            async with self.received:
                await self.received.wait_for(predicate)

        await asyncio.wait_for(_wait(), timeout)

    async def _record(self, method: str, request: web.Request) -> None:
        self.calls.append((method, request.path))
        if method == "POST":
            self.restarts.append(request.match_info["name"])
            self.restarted_at.append(time.monotonic())
        async with self.received:
            self.received.notify_all()
        await self._gate.wait()

    async def start(self) -> None:
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}"

    async def stop(self) -> None:
        await self._runner.cleanup()

    async def _get(self, request: web.Request) -> web.Response:
        await self._record("GET", request)
        if request.match_info["name"] in self.broken:
            status, text = self.broken[request.match_info["name"]]
            return web.Response(status=status, text=text)
        body = {"name": request.match_info["name"], "status": "degraded", **self.extra}
        return web.json_response(body)

    async def _restart(self, request: web.Request) -> web.Response:
        await self._record("POST", request)
        return web.json_response({"name": request.match_info["name"], "status": "restarted"})

    async def _delete(self, request: web.Request) -> web.Response:
        self.calls.append(("POST", request.path))
        self.deleted.append(request.match_info["name"])
        return web.json_response({"name": request.match_info["name"], "status": "deleted"})


def restart_then_answer(body: dict[str, Any]) -> Turn:
    """The model: restart `api`; once any tool result is in, finish; synthesis streams ANSWER."""
    if body.get("stream"):
        return answer(ANSWER)
    if any(m["role"] == "tool" for m in body["messages"]):
        return answer("api restarted")
    return tool_call("ops__restart", {"name": "api"}, id="call_restart")
