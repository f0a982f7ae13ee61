"""One real app with every surface on (Slack HTTP mode, Feishu webhook, the console) over the
fakes, and a snapshot of everything an inbound request could change: what the database holds,
what the model was asked, what was posted on either platform."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from sqlalchemy import func, select
from sqlmodel import Session, SQLModel

from bot.server import RUNTIME_KEY, create_app
from bot.storage.models import (
    Approval,
    ApprovalDecision,
    ConsoleItem,
    ConsoleThread,
    Conversation,
    InboxEvent,
    Message,
    Run,
)
from tests.fakes.feishu_api import FakeFeishu
from tests.fakes.fixtures import fake_openai  # noqa: F401
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.ops_api import OpsAPI, ops_manifest
from tests.fakes.serving import started
from tests.fakes.slack_api import BOT_TOKEN, FakeSlack
from tests.slack.payloads import SIGNING_SECRET

# what a request acts on (dedupe bookkeeping, `processed_event`, may grow for ignored events)
STATE_TABLES: tuple[type[SQLModel], ...] = (
    Conversation, Message, Run, Approval, ApprovalDecision, InboxEvent, ConsoleItem, ConsoleThread,
)  # fmt: skip


SLACK_POSTS = ("chat.postMessage", "chat.update", "views.open", "files.completeUploadExternal")


@dataclass(frozen=True)
class Snapshot:
    """Counts of everything an inbound request may change (equal snapshots: nothing changed)."""

    rows: tuple[int, ...]
    model_requests: int
    slack_calls: int
    feishu_messages: int


@dataclass
class EdgeApp:
    client: TestClient
    slack: FakeSlack
    feishu: FakeFeishu
    llm: FakeOpenAI

    async def snapshot(self) -> Snapshot:
        assert self.client.app is not None
        runtime = self.client.app[RUNTIME_KEY]

        def count(session: Session) -> tuple[int, ...]:
            return tuple(
                session.execute(select(func.count()).select_from(t)).scalar_one()
                for t in STATE_TABLES
            )

        # what is posted for everyone (a private note to a clicker or a commander is fine)
        slack_writes = [c for c in self.slack.calls() if c.method in SLACK_POSTS]
        feishu_writes = [c for c in self.feishu.requests if _posted_in_a_chat(c.op, c.query)]
        return Snapshot(
            await runtime.db.run(count),
            len(self.llm.requests),
            len(slack_writes),
            len(feishu_writes),
        )


@pytest.fixture
async def fake_feishu() -> AsyncIterator[FakeFeishu]:
    async with started(FakeFeishu()) as fake:
        yield fake


@pytest.fixture
async def edge_app(
    database_url, aiohttp_client, tmp_path, fake_slack: FakeSlack, fake_feishu: FakeFeishu,
    fake_openai: FakeOpenAI, ops_api: OpsAPI,  # noqa: F811
) -> EdgeApp:  # fmt: skip
    """`database_url` first: the app is shut down before its schema is dropped."""
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    (manifests / "ops.yaml").write_text(ops_manifest(ops_api.url))
    values: dict[str, Any] = {
        "database_url": database_url,
        "chatops_manifests_dir": manifests,
        "openai_base_url": fake_openai.base_url,
        "openai_api_key": "sk-test-not-a-secret",
        "chatops_model": "fake-model",
        "chatops_llm_max_retries": 0,
        "slack_bot_token": BOT_TOKEN,
        "slack_signing_secret": SIGNING_SECRET,
        "slack_api_url": fake_slack.url,
        "feishu_app_id": fake_feishu.app_id,
        "feishu_app_secret": fake_feishu.app_secret,
        "feishu_verification_token": fake_feishu.verification_token,
        "feishu_encrypt_key": fake_feishu.encrypt_key,
        "feishu_domain": fake_feishu.url,
    }
    from bot.config import Settings

    client = await aiohttp_client(create_app(Settings(_env_file=None, **values)))
    return EdgeApp(client, fake_slack, fake_feishu, fake_openai)


def _posted_in_a_chat(op: str, query: dict[str, str]) -> bool:
    """A Feishu write everyone in a chat sees (a direct message to one user is a private note)."""
    if op in ("message.reply", "message.patch"):
        return True
    return op == "message.create" and query.get("receive_id_type") == "chat_id"
