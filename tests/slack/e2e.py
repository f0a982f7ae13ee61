"""End-to-end harness: the real app (`bot.server.create_app`) with Slack pointed at FakeSlack,
the model at FakeOpenAI and the connector at a fake ops API; requests are signed for real."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestClient

from bot.config import Settings
from bot.surfaces.slack import SLACK_INBOUND_KEY
from tests.fakes.openai_server import Turn, answer, tool_call
from tests.fakes.slack_api import BOT_TOKEN, FakeSlack
from tests.slack.payloads import (
    CHANNEL,
    SIGNING_SECRET,
    as_body,
    block_actions,
    signed_headers,
    view_submission,
)

MANIFEST = """\
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
    approvers: [U0LEAD]
    risk: high
"""
ANSWER = "## Restarted\n**api** is back. See [the runbook](https://runbooks.example/api)."


class OpsAPI:
    """The system the agent drives: records every restart."""

    def __init__(self) -> None:
        self.restarts: list[str] = []
        self.app = web.Application()
        self.app.router.add_get("/services/{name}", self._get)
        self.app.router.add_post("/services/{name}/restart", self._restart)
        self.runner = web.AppRunner(self.app)
        self.url = ""

    async def start(self) -> None:
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{self.runner.addresses[0][1]}"

    async def stop(self) -> None:
        await self.runner.cleanup()

    async def _get(self, request: web.Request) -> web.Response:
        return web.json_response({"name": request.match_info["name"], "status": "degraded"})

    async def _restart(self, request: web.Request) -> web.Response:
        self.restarts.append(request.match_info["name"])
        return web.json_response({"name": request.match_info["name"], "status": "restarted"})


def restart_then_answer(body: dict[str, Any]) -> Turn:
    """The model: restart `api`; once any tool result is in, finish; synthesis streams ANSWER."""
    if body.get("stream"):
        return answer(ANSWER)
    if any(m["role"] == "tool" for m in body["messages"]):
        return answer("api restarted")
    return tool_call("ops__restart", {"name": "api"}, id="call_restart")


def bot_settings(
    *, database_url: str, manifests: Path, slack: FakeSlack, llm_url: str, **extra: Any
) -> Settings:
    return Settings(
        _env_file=None,
        database_url=database_url,
        chatops_manifests_dir=manifests,
        openai_base_url=llm_url,
        openai_api_key="sk-test-not-a-secret",
        chatops_model="fake-model",
        chatops_llm_max_retries=0,
        slack_bot_token=BOT_TOKEN,
        slack_signing_secret=SIGNING_SECRET,
        slack_api_url=slack.url,
        **extra,
    )


class SlackBot:
    """Talks to the running app the way Slack does: signed events, clicks and submissions."""

    def __init__(self, client: TestClient, fake: FakeSlack) -> None:
        self.client = client
        self.fake = fake

    @property
    def app(self) -> web.Application:
        assert self.client.app is not None
        return self.client.app

    async def send(self, payload: dict[str, Any] | str, **sign: Any) -> int:
        body = as_body(payload)
        response = await self.client.post(
            "/slack/events", data=body, headers=signed_headers(body, **sign)
        )
        await self.app[SLACK_INBOUND_KEY].wait_idle(10)
        return response.status

    async def click(self, card: dict[str, Any], action_id: str, *, user: str) -> int:
        return await self.send(block_actions(card, action_id, user=user))

    async def submit_reject(self, view: dict[str, Any], *, user: str, reason: str | None) -> int:
        return await self.send(view_submission(view, user=user, reason=reason))

    async def wait_idle(self) -> None:
        from bot.server import RUNTIME_KEY

        await self.app[RUNTIME_KEY].run_manager.wait_idle(15)  # type: ignore[attr-defined]


def has_buttons(message: dict[str, Any]) -> bool:
    return any(b.get("type") == "actions" for b in message.get("blocks", []))


def card_in(fake: FakeSlack, root: str, *, pending: bool | None = None) -> dict[str, Any] | None:
    """The approval card posted in the thread (by its header), optionally only if (not) pending."""
    for message in fake.thread_messages(CHANNEL, root):
        blocks = message.get("blocks", [])
        is_card = bool(blocks) and blocks[0].get("type") == "header"
        if is_card and (pending is None or has_buttons(message) == pending):
            return message
    return None


def texts(fake: FakeSlack, root: str) -> list[str]:
    return [m["text"] for m in fake.thread_messages(CHANNEL, root)]
