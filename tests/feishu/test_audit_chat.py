"""`audit 7d [connector]` addressed to the bot: a report card without the model, viewers only."""

from __future__ import annotations

import json

import pytest

from bot.server import RUNTIME_KEY, create_app
from tests.fakes.feishu_api import FakeFeishu
from tests.fakes.openai_server import FakeOpenAI, answer
from tests.feishu.e2e import LEAD, bot_settings, markdown_of, title


@pytest.fixture
async def url(aiohttp_client, tmp_path, database_url, fake_feishu, fake_openai):
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    settings = bot_settings(
        database_url=database_url,
        manifests=manifests,
        fake=fake_feishu,
        llm_url=fake_openai.base_url,
        chatops_audit_viewers="ou_lead,ou_auditor",
    )
    client = await aiohttp_client(create_app(settings))
    yield str(client.make_url("/feishu/events"))
    await client.app[RUNTIME_KEY].run_manager.wait_idle(15)  # no run left mid-write


async def test_viewer_gets_a_report_card_in_the_thread_without_the_model(
    url: str, fake_feishu: FakeFeishu, fake_openai: FakeOpenAI
):
    event = fake_feishu.message_event("audit 7d ops", user=LEAD)
    root = event["event"]["message"]["message_id"]
    status, _ = await fake_feishu.push(url, event)
    assert status == 200
    [card] = await fake_feishu.wait_for(lambda f: f.cards_in(root), 10)
    assert title(card) == "Audit report"
    assert "Totals" in markdown_of(card) and "ops" in json.dumps(card)
    assert fake_openai.requests == []


async def test_non_viewer_is_told_privately(
    url: str, fake_feishu: FakeFeishu, fake_openai: FakeOpenAI
):
    event = fake_feishu.message_event("audit 7d", user="ou_dev")
    root = event["event"]["message"]["message_id"]
    await fake_feishu.push(url, event)
    [dm] = await fake_feishu.wait_for(lambda f: f.calls("message.create"), 10)
    assert dm.body["receive_id"] == "ou_dev"
    assert "not allowed to see audit reports" in json.loads(dm.body["content"])["text"]
    assert fake_feishu.replies_to(root) == [] and fake_openai.requests == []


async def test_text_starting_with_a_duration_goes_to_the_agent(
    url: str, fake_feishu: FakeFeishu, fake_openai: FakeOpenAI
):
    fake_openai.respond_with(lambda body: answer("Noted."))
    event = fake_feishu.message_event("2h later restart the api", user=LEAD)
    root = event["event"]["message"]["message_id"]
    await fake_feishu.push(url, event)
    await fake_feishu.wait_for(lambda f: len(f.cards_in(root)) >= 2, 10)
    assert fake_openai.requests and fake_feishu.calls("message.create") == []
