"""End-to-end harness: the real app (`bot.server.create_app`) with Feishu pointed at FakeFeishu,
the model at FakeOpenAI and the connector at a fake ops API; events are encrypted and signed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from aiohttp import web

from bot.config import Settings
from tests.fakes.feishu_api import FakeFeishu, FakeMessage
from tests.fakes.openai_server import Turn, answer, tool_call

LEAD = "ou_lead"
DEV = "ou_dev"
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
    approvers: [ou_lead]
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
    *, database_url: str, manifests: Path, fake: FakeFeishu, llm_url: str, **extra: Any
) -> Settings:
    values: dict[str, Any] = {
        "database_url": database_url,
        "chatops_manifests_dir": manifests,
        "openai_base_url": llm_url,
        "openai_api_key": "sk-test-not-a-secret",
        "chatops_model": "fake-model",
        "chatops_llm_max_retries": 0,
        "feishu_app_id": fake.app_id,
        "feishu_app_secret": fake.app_secret,
        "feishu_verification_token": fake.verification_token,
        "feishu_encrypt_key": fake.encrypt_key,
        "feishu_domain": fake.url,
    }
    values.update(extra)
    return Settings(_env_file=None, **values)


def approval_message(fake: FakeFeishu, root: str) -> FakeMessage | None:
    """The approval card in the thread (by its form or its outcome header)."""
    for message in fake.replies_to(root):
        if message.msg_type != "interactive":
            continue
        title = message.content.get("header", {}).get("title", {}).get("content", "")
        if title.startswith(("Approval needed", "Approved", "Rejected", "Expired", "Cancelled")):
            return message
    return None


def has_form(card: dict[str, Any]) -> bool:
    return '"tag": "form"' in json.dumps(card)


def status_message(fake: FakeFeishu, root: str) -> FakeMessage:
    """The status card: the first reply in the thread."""
    return fake.replies_to(root)[0]


def title(card: dict[str, Any]) -> str:
    return card.get("header", {}).get("title", {}).get("content", "")


def markdown_of(card: dict[str, Any]) -> str:
    return "\n".join(
        e.get("content", "")
        for e in card.get("body", {}).get("elements", [])
        if e.get("tag") == "markdown"
    )
