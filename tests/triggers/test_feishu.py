"""A trigger whose `where` is a Feishu chat: the alert's summary is the bot's new message in the
chat, and the run's status and approval card are replies in its thread (real app, FakeFeishu)."""

from __future__ import annotations

import pytest
from sqlmodel import select

from bot.server import RUNTIME_KEY, create_app
from bot.storage.models import Run
from tests.fakes.feishu_api import FakeFeishu
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.ops_api import OpsAPI, restart_then_answer
from tests.feishu.e2e import approval_message, bot_settings, manifest
from tests.triggers.payloads import AM_TOKEN, alertmanager, body

pytestmark = pytest.mark.both_databases

CHAT = "oc_ops_alerts"


async def test_alertmanager_alert_opens_a_thread_in_a_feishu_chat(
    database_url, aiohttp_client, tmp_path, monkeypatch, ops_api: OpsAPI,
    fake_feishu: FakeFeishu, fake_openai: FakeOpenAI,
):  # fmt: skip
    manifests, triggers = tmp_path / "manifests", tmp_path / "triggers"
    manifests.mkdir()
    triggers.mkdir()
    (manifests / "ops.yaml").write_text(manifest(ops_api.url))
    (triggers / "am.yaml").write_text(
        "name: am\nsource: alertmanager\nsecret_env: AM_WEBHOOK_TOKEN\n"
        f"where: {{platform: feishu, channel: {CHAT}, workspace: {fake_feishu.tenant_key}}}\n"
        'request: "restart {{ alert.labels.service }}"\n'
    )
    monkeypatch.setenv("AM_WEBHOOK_TOKEN", AM_TOKEN)
    settings = bot_settings(
        database_url=database_url, manifests=manifests, fake=fake_feishu,
        llm_url=fake_openai.base_url, chatops_triggers_dir=triggers,
    )  # fmt: skip
    fake_openai.respond_with(restart_then_answer)
    client = await aiohttp_client(create_app(settings))

    response = await client.post(
        "/hooks/am", data=body(alertmanager()), headers={"Authorization": f"Bearer {AM_TOKEN}"}
    )
    assert response.status == 200 and (await response.json())["started"] == 1
    [root] = [m for m in fake_feishu.messages.values() if m.chat_id == CHAT and not m.root_id]
    assert "[FIRING] HighErrorRate on api" in root.contents[0]
    card = await fake_feishu.wait_for(lambda fake: approval_message(fake, root.message_id), 15)
    assert "Approval needed: ops__restart" in str(card.content)
    runs = await client.app[RUNTIME_KEY].db.run(lambda s: s.exec(select(Run)).all())
    assert [(r.requester, r.query) for r in runs] == [("trigger:am", "restart api")]
