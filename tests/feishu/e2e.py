"""End-to-end harness: the real app (`bot.server.create_app`) with Feishu pointed at FakeFeishu,
the model at FakeOpenAI and the connector at a fake ops API; events are encrypted and signed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bot.config import Settings
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


def plain_text_of(card: dict[str, Any]) -> str:
    """The plain-text divs of a card (untrusted text: reasons, arguments)."""
    return "\n".join(
        e.get("text", {}).get("content", "")
        for e in card.get("body", {}).get("elements", [])
        if e.get("tag") == "div" and e.get("text", {}).get("tag") == "plain_text"
    )
