"""End-to-end harness: the real app (`bot.server.create_app`) with Feishu pointed at FakeFeishu,
the model at FakeOpenAI and the connector at a fake ops API; events are encrypted and signed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from aiohttp.test_utils import TestClient

from bot.config import Settings
from bot.server import RUNTIME_KEY
from bot.surfaces.feishu.surface import FEISHU_KEY
from tests.fakes.feishu_api import FakeFeishu, FakeMessage
from tests.fakes.ops_api import ANSWER, OpsAPI, ops_manifest, restart_then_answer

LEAD = "ou_lead"
DEV = "ou_dev"
__all__ = ["ANSWER", "OpsAPI", "restart_then_answer", "manifest"]

MANIFEST_APPROVERS = ("ou_lead",)


def manifest(url: str) -> str:
    """The ops manifest with this platform's approver."""
    return ops_manifest(url, approvers=MANIFEST_APPROVERS)


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
        if title.startswith(
            (
                "Approval needed",
                "Approved",
                "Rejected",
                "Expired",
                "Cancelled",
                "Changes requested",
                "Approvals:",
            )  # a batch card, once every call of it ended
        ):
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


def plain_text_of(card: dict[str, Any]) -> str:
    """The plain-text divs of a card (untrusted text: reasons, arguments)."""
    return "\n".join(
        e.get("text", {}).get("content", "")
        for e in card.get("body", {}).get("elements", [])
        if e.get("tag") == "div" and e.get("text", {}).get("tag") == "plain_text"
    )


class FeishuBot:
    """Talks to the running app the way Feishu does."""

    def __init__(self, client: TestClient, fake: FakeFeishu) -> None:
        self.client = client
        self.fake = fake
        self.url = str(client.make_url("/feishu/events"))

    async def send(self, payload: dict[str, Any], **kw: Any) -> tuple[int, Any]:
        answer = await self.fake.push(self.url, payload, **kw)
        assert self.client.app is not None
        await self.client.app[FEISHU_KEY].wait_idle(10)  # the event reached the run manager
        return answer

    async def click(self, card: FakeMessage, decision: str, *, user: str, reason: str = ""):
        return await self.send(
            self.fake.card_action(card.message_id, decision, user=user, reason=reason)
        )

    async def wait_idle(self) -> None:
        assert self.client.app is not None
        await self.client.app[RUNTIME_KEY].run_manager.wait_idle(15)  # type: ignore[attr-defined]

    async def request_restart(self) -> tuple[str, FakeMessage]:
        """DEV asks for a restart; returns the thread root and the pending approval card."""
        event = self.fake.message_event("restart api", user=DEV)
        root = event["event"]["message"]["message_id"]
        await self.send(event)
        return root, await wait_card(self.fake, root, pending=True)


async def wait_card(fake: FakeFeishu, root: str, *, pending: bool) -> FakeMessage:
    def find(f: FakeFeishu) -> FakeMessage | None:
        message = approval_message(f, root)
        return message if message and has_form(message.content) == pending else None

    return await fake.wait_for(find, 15)
