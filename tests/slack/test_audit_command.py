"""`/chatops-audit` through the real app: viewers get the report in the channel, anyone else a
private note; the command is acked at once and never reaches the model."""

from __future__ import annotations

import pytest

from bot.server import create_app
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_api import FakeSlack
from tests.slack.e2e import SlackBot, bot_settings
from tests.slack.payloads import CHANNEL, slash_command


@pytest.fixture
async def bot(aiohttp_client, tmp_path, fake_slack: FakeSlack, fake_openai: FakeOpenAI):
    (tmp_path / "manifests").mkdir()
    settings = bot_settings(
        database_url=f"sqlite:///{tmp_path / 'chatops.db'}",
        manifests=tmp_path / "manifests",
        slack=fake_slack,
        llm_url=fake_openai.base_url,
        chatops_audit_viewers="U0AUDIT",
    )
    return SlackBot(await aiohttp_client(create_app(settings)), fake_slack)


async def test_viewer_gets_the_report_privately_or_in_the_channel_when_shared(
    bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI
):
    assert await bot.send(slash_command("7d", user="U0AUDIT")) == 200
    assert fake_slack.calls("chat.postMessage") == []
    [private] = fake_slack.ephemeral
    assert private["user"] == "U0AUDIT" and private["channel"] == CHANNEL
    assert private["blocks"][0]["text"]["text"] == "Audit report"
    fake_slack.ephemeral.clear()
    assert await bot.send(slash_command("7d share", user="U0AUDIT")) == 200
    [post] = fake_slack.calls("chat.postMessage")
    assert post.args["channel"] == CHANNEL
    assert "thread_ts" not in post.args
    assert post.args["blocks"][0] == {
        "type": "header",
        "text": {"type": "plain_text", "text": "Audit report"},
    }
    assert post.args["text"].startswith("Audit report: ")
    assert fake_slack.ephemeral == []
    assert fake_openai.requests == []


async def test_non_viewer_is_told_privately(bot: SlackBot, fake_slack: FakeSlack):
    assert await bot.send(slash_command("7d", user="U0NOSY")) == 200
    assert fake_slack.calls("chat.postMessage") == []
    [note] = fake_slack.ephemeral
    assert note["user"] == "U0NOSY"
    assert "CHATOPS_AUDIT_VIEWERS" in note["text"]


async def test_bad_arguments_get_the_usage(bot: SlackBot, fake_slack: FakeSlack):
    assert await bot.send(slash_command("7d too many words here", user="U0AUDIT")) == 200
    [note] = fake_slack.ephemeral
    assert "Usage" in note["text"]
    assert fake_slack.calls("chat.postMessage") == []


async def test_forged_command_is_401(bot: SlackBot, fake_slack: FakeSlack):
    assert await bot.send(slash_command("7d", user="U0AUDIT"), secret="forged") == 401
    assert {call.method for call in fake_slack.calls()} <= {"auth.test"}  # start-up's only
    assert fake_slack.ephemeral == []
