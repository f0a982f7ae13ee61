"""Every event and click is checked against the workspace, organisation and app it must come
from, and every click against the card it claims; a member of another organisation (Slack
Connect) never approves unless the manifest names them. Through the real app, signed."""

from __future__ import annotations

import pytest

from bot.server import RUNTIME_KEY
from bot.surfaces.slack.cards import APPROVE_ACTION, REJECT_ACTION
from tests.fakes.openai_server import FakeOpenAI, tool_call
from tests.fakes.ops_api import OpsAPI
from tests.fakes.slack_api import FakeSlack
from tests.slack.e2e import SlackBot, ops_bot, wait_card
from tests.slack.payloads import block_actions, mention

EXTERNAL = "U0EXT"  # a member of another organisation, in a Slack Connect channel


@pytest.fixture
async def bot(database_url, aiohttp_client, tmp_path, ops_api, fake_slack, fake_openai) -> SlackBot:
    """Approvers: none listed, so anyone in the thread (of this workspace) may approve."""
    return await ops_bot(aiohttp_client, database_url, tmp_path, ops_api.url, fake_slack,
                         fake_openai.base_url)  # fmt: skip


async def dispatched(bot: SlackBot) -> int:
    runtime = bot.app[RUNTIME_KEY]
    return len(runtime.run_manager._active)


@pytest.mark.parametrize(
    ("field", "value"),
    [("team_id", "T0OTHER"), ("api_app_id", "A0OTHERAPP"), ("enterprise_id", "E0OTHER")],
)
async def test_an_event_for_another_workspace_org_or_app_starts_nothing(
    bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, field: str, value: str
) -> None:
    event = mention("restart api", user="U0DEV")
    event[field] = value
    assert await bot.send(event) == 200  # acked (signed by Slack), and dropped
    assert fake_openai.requests == [] and await dispatched(bot) == 0
    assert fake_slack.calls("chat.postMessage") == []


async def pending_card(bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, text: str):
    fake_openai.script(tool_call("ops__restart", {"name": "api"}))
    event = mention(text, user="U0DEV")
    await bot.send(event)
    return await wait_card(fake_slack, event["event"]["ts"], pending=True)


async def test_a_click_is_tied_to_the_card_it_claims(
    bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, ops_api: OpsAPI
) -> None:
    """A click on another message (a forged container, or a button copied onto another
    message) names this approval but is not on its card: refused, still pending."""
    card = await pending_card(bot, fake_slack, fake_openai, "restart api")
    forged = block_actions(card, APPROVE_ACTION, user="U0LEAD", message_ts="1700000000.999999")
    assert await bot.send(forged) == 200
    assert ops_api.restarts == []
    [note] = fake_slack.ephemeral
    assert "not on this approval's card" in note["text"]
    assert await bot.send(block_actions(card, APPROVE_ACTION, user="U0LEAD")) == 200
    await bot.wait_idle()
    assert ops_api.restarts == ["api"]


async def test_a_click_for_another_app_is_dropped(
    bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, ops_api: OpsAPI
) -> None:
    card = await pending_card(bot, fake_slack, fake_openai, "restart api")
    other_app = block_actions(card, APPROVE_ACTION, user="U0LEAD", app_id="A0OTHERAPP")
    assert await bot.send(other_app) == 200
    assert ops_api.restarts == [] and fake_slack.ephemeral == []


async def test_a_slack_connect_member_of_another_org_never_approves_by_default(
    bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, ops_api: OpsAPI
) -> None:
    """`approvers: []` means anyone in the thread, of this workspace: not an external user."""
    card = await pending_card(bot, fake_slack, fake_openai, "restart api")
    for action in (APPROVE_ACTION, REJECT_ACTION):
        click = block_actions(card, action, user=EXTERNAL, user_team="T0OTHER", team="T0OTHER")
        assert await bot.send(click) == 200
    assert ops_api.restarts == [] and fake_slack.views == []  # no reject dialog either
    assert all("not a member of this workspace" in n["text"] for n in fake_slack.ephemeral)
    assert len(fake_slack.ephemeral) == 2


async def test_an_external_approver_the_manifest_names_may_approve(
    database_url, aiohttp_client, tmp_path, ops_api: OpsAPI, fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
) -> None:  # fmt: skip
    bot = await ops_bot(aiohttp_client, database_url, tmp_path, ops_api.url, fake_slack,
                        fake_openai.base_url, approvers=(EXTERNAL,))  # fmt: skip
    card = await pending_card(bot, fake_slack, fake_openai, "restart api")
    click = block_actions(card, APPROVE_ACTION, user=EXTERNAL, user_team="T0OTHER", team="T0OTHER")
    assert await bot.send(click) == 200
    await bot.wait_idle()
    assert ops_api.restarts == ["api"]
