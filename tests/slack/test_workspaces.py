"""One deployment, two Slack workspaces (OAuth installs), through the real entry points.

The app is `bot.server.create_app` in OAuth mode; installs go through `/slack/install` and
`/slack/oauth_redirect` against FakeSlack's `oauth.v2.access`, events and clicks are signed
for real on `/slack/events`. FakeSlack gives each team its own tokens and refuses a token on
another team's channel (`channel_not_found`), so a crossed token fails the test twice over.
Every test runs on SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from bot.config import Settings
from bot.errors import StartupError
from bot.server import RUNTIME_KEY, create_app
from bot.storage.models import CallLog, Run
from bot.surfaces.slack.cards import APPROVE_ACTION
from tests.fakes.openai_server import FakeOpenAI, Turn, answer, tool_call
from tests.fakes.ops_api import OpsAPI
from tests.fakes.slack_api import FakeSlack
from tests.slack.e2e import SlackBot, has_buttons
from tests.slack.payloads import SIGNING_SECRET, block_actions, mention, slash_command
from tests.slack.workspaces import (
    CHANNEL_A,
    CHANNEL_B,
    CLIENT_ID,
    REDIRECT,
    TEAM_A,
    TEAM_B,
    click_from,
    finish_install,
    from_team,
    install,
    installed_teams,
    oauth_settings,
    slash_from,
    start_install,
    two_workspaces,
)

pytestmark = pytest.mark.both_databases


@pytest.fixture
async def bot(
    aiohttp_client: Any, database_url: str, tmp_path: Any, ops_api: OpsAPI,
    fake_slack: FakeSlack, fake_openai: FakeOpenAI,
) -> SlackBot:  # fmt: skip
    two_workspaces(fake_slack)
    settings = oauth_settings(
        database_url=database_url, directory=tmp_path, ops_url=ops_api.url, slack=fake_slack,
        llm_url=fake_openai.base_url, chatops_audit_viewers="U0DEV",
    )  # fmt: skip
    bot = SlackBot(await aiohttp_client(create_app(settings)), fake_slack)
    bot.openai = fake_openai  # type: ignore[attr-defined]
    return bot


def restart_in_a_status_in_b(body: dict[str, Any]) -> Turn:
    """Team A's thread restarts `api` (approval needed); team B's reads a service (none)."""
    if body.get("stream"):
        return answer("done")
    if any(m["role"] == "tool" for m in body["messages"]):
        return answer("done")
    asked = json.dumps(body["messages"])
    if "restart" in asked:
        return tool_call("ops__restart", {"name": "api"}, id="call_restart")
    return tool_call("ops__get_service", {"name": "db"}, id="call_status")


def posts_on(fake: FakeSlack, channel: str) -> list[Any]:
    return [
        c for c in fake.calls()
        if c.method.startswith("chat.") and c.args.get("channel") == channel
    ]  # fmt: skip


async def test_install_flow_stores_a_token_per_workspace(bot: SlackBot, database_url: str):
    fake = bot.fake
    await install(bot, fake, TEAM_A)
    await install(bot, fake, TEAM_B)
    exchanges = fake.calls("oauth.v2.access")
    assert [c.args.get("redirect_uri") for c in exchanges] == [REDIRECT, REDIRECT]
    stored = {team: token for _, team, token in installed_teams(database_url)}
    assert set(stored) == {TEAM_A, TEAM_B}
    assert stored[TEAM_A] in fake.tokens_of(TEAM_A)
    assert stored[TEAM_B] in fake.tokens_of(TEAM_B)


async def test_a_forged_or_replayed_install_stores_nothing(bot: SlackBot, database_url: str):
    """No state cookie, a state never issued, a code used twice, a code for another app or
    another redirect URL: each install fails and nothing is stored."""
    fake = bot.fake
    state, cookie = await start_install(bot)
    code = fake.authorize(TEAM_A, client_id=CLIENT_ID, redirect_uri=REDIRECT)
    assert await finish_install(bot, code, state, "") != 200  # no cookie: another browser
    assert await finish_install(bot, code, "forged", cookie) != 200
    state, cookie = await start_install(bot)
    other_app = fake.authorize(TEAM_A, client_id="9999.0000", redirect_uri=REDIRECT)
    assert await finish_install(bot, other_app, state, cookie) != 200
    state, cookie = await start_install(bot)
    elsewhere = fake.authorize(TEAM_A, client_id=CLIENT_ID, redirect_uri="https://evil.example/cb")
    assert await finish_install(bot, elsewhere, state, cookie) != 200
    assert installed_teams(database_url) == []
    errors = [c for c in fake.calls("oauth.v2.access")]
    assert errors  # Slack itself was asked and refused (invalid_code, bad_redirect_uri)
    state, cookie = await start_install(bot)
    good = fake.authorize(TEAM_A, client_id=CLIENT_ID, redirect_uri=REDIRECT)
    assert await finish_install(bot, good, state, cookie) == 200
    assert await finish_install(bot, good, state, cookie) != 200  # the state is spent
    assert [team for _, team, _ in installed_teams(database_url)] == [TEAM_A]


async def test_each_workspace_is_answered_with_its_own_token(bot: SlackBot):
    fake = bot.fake
    await install(bot, fake, TEAM_A)
    await install(bot, fake, TEAM_B)
    fake_answer(bot).respond_with(lambda body: answer("hello there"))
    assert await bot.send(from_team(mention("hi", channel=CHANNEL_A), TEAM_A)) == 200
    assert await bot.send(from_team(mention("hi", channel=CHANNEL_B), TEAM_B)) == 200
    await bot.wait_idle()
    on_a, on_b = posts_on(fake, CHANNEL_A), posts_on(fake, CHANNEL_B)
    assert on_a and on_b
    assert all(c.status == 200 for c in on_a + on_b)
    assert {fake.team_of(c) for c in on_a} == {TEAM_A}
    assert {fake.team_of(c) for c in on_b} == {TEAM_B}
    answers = [m["text"] for (ch, _), m in fake.messages.items() if ch in (CHANNEL_A, CHANNEL_B)]
    assert sum("hello there" in t for t in answers) == 2


async def test_a_workspace_without_an_installation_is_ignored(bot: SlackBot):
    await install(bot, bot.fake, TEAM_A)
    assert await bot.send(from_team(mention("hi", channel=CHANNEL_B), TEAM_B)) == 200
    await bot.wait_idle()
    assert posts_on(bot.fake, CHANNEL_B) == []


async def test_a_click_from_workspace_b_never_decides_an_approval_of_a(
    bot: SlackBot, ops_api: OpsAPI
):
    fake = bot.fake
    await install(bot, fake, TEAM_A)
    await install(bot, fake, TEAM_B)
    fake_answer(bot).respond_with(restart_in_a_status_in_b)
    event = from_team(mention("restart api", channel=CHANNEL_A), TEAM_A)
    root = event["event"]["ts"]
    await bot.send(event)
    card = await fake.wait_for(lambda: card_in_channel(fake, CHANNEL_A, root), 15)
    # a member of B clicks, with a payload forged to carry A's card and approval id: the
    # signature is good (one app, one signing secret), the team is B
    forged = click_from(
        block_actions(card, APPROVE_ACTION, user="U0EVE", channel=CHANNEL_A), TEAM_B
    )
    assert await bot.send(forged) == 200
    assert ops_api.restarts == []
    assert has_buttons(card_in_channel(fake, CHANNEL_A, root) or {})  # still pending
    # the same click from A decides it
    assert await bot.send(click_from(block_actions(card, APPROVE_ACTION, user="U0LEAD",
                                                   channel=CHANNEL_A), TEAM_A)) == 200  # fmt: skip
    await bot.wait_idle()
    assert ops_api.restarts == ["api"]


async def test_an_audit_report_asked_in_a_never_lists_the_calls_of_b(
    bot: SlackBot, ops_api: OpsAPI, database_url: str
):
    fake = bot.fake
    await install(bot, fake, TEAM_A)
    await install(bot, fake, TEAM_B)
    fake_answer(bot).respond_with(restart_in_a_status_in_b)
    await bot.send(from_team(mention("status of db", user="U0BOB", channel=CHANNEL_B), TEAM_B))
    await bot.send(from_team(mention("status of db please", channel=CHANNEL_A), TEAM_A))
    await bot.wait_idle()
    rows = await call_rows(bot)
    assert sorted((r.workspace, r.channel) for r in rows) == [(TEAM_A, CHANNEL_A),
                                                              (TEAM_B, CHANNEL_B)]  # fmt: skip
    fake.ephemeral.clear()
    command = slash_from(slash_command("7d", user="U0DEV", channel="D0DEV"), TEAM_A)
    assert await bot.send(command) == 200
    await bot.wait_idle()
    [shown] = await fake.wait_for(lambda: list(fake.ephemeral), 10)
    report = json.dumps(shown["blocks"])
    assert "U0DEV" in report and "U0BOB" not in report  # "By requester": A's alone
    assert fake.team_of(fake.calls("chat.postEphemeral")[-1]) == TEAM_A


async def test_uninstall_deletes_the_tokens_and_stops_the_runs(
    bot: SlackBot, ops_api: OpsAPI, database_url: str
):
    fake = bot.fake
    await install(bot, fake, TEAM_A)
    await install(bot, fake, TEAM_B)
    fake_answer(bot).respond_with(restart_in_a_status_in_b)
    event = from_team(mention("restart api", channel=CHANNEL_A), TEAM_A)
    root = event["event"]["ts"]
    await bot.send(event)
    await fake.wait_for(lambda: card_in_channel(fake, CHANNEL_A, root), 15)  # waiting
    fake.revoke(TEAM_A)  # Slack revokes A's tokens, then tells the app
    uninstalled = from_team(uninstall_event(), TEAM_A)
    assert await bot.send(uninstalled) == 200
    await bot.wait_idle()
    assert [team for _, team, _ in installed_teams(database_url)] == [TEAM_B]
    runs = await run_rows(bot)
    assert [r.status for r in runs] == ["cancelled"]
    assert ops_api.restarts == []
    before = len(fake.calls())
    await bot.send(from_team(mention("hi again", channel=CHANNEL_A), TEAM_A))
    await bot.wait_idle()
    assert [c for c in fake.calls()[before:] if c.method.startswith("chat.")] == []
    # B is untouched
    fake_answer(bot).respond_with(lambda body: answer("still here"))
    await bot.send(from_team(mention("hi", channel=CHANNEL_B), TEAM_B))
    await bot.wait_idle()
    assert {fake.team_of(c) for c in posts_on(fake, CHANNEL_B)} == {TEAM_B}


async def test_tokens_revoked_deletes_the_workspace_only_for_the_bot_token(
    bot: SlackBot, database_url: str
):
    await install(bot, bot.fake, TEAM_A)
    people_only = revoked_event(oauth=["U0INSTALLER"], bot=[])
    assert await bot.send(from_team(people_only, TEAM_A)) == 200
    assert [team for _, team, _ in installed_teams(database_url)] == [TEAM_A]
    assert await bot.send(from_team(revoked_event(oauth=[], bot=["U0BOT"]), TEAM_A)) == 200
    assert installed_teams(database_url) == []


async def test_a_rotating_token_is_refreshed_before_it_expires(bot: SlackBot, database_url: str):
    fake = bot.fake
    fake.token_lifetime_s = 60  # well inside the rotation window (120 minutes)
    await install(bot, fake, TEAM_A, rotation=True)
    [(_, _, first)] = installed_teams(database_url)
    assert first.startswith("xoxe.xoxb-")
    fake_answer(bot).respond_with(lambda body: answer("rotated"))
    await bot.send(from_team(mention("hi", channel=CHANNEL_A), TEAM_A))
    await bot.wait_idle()
    refreshes = [c for c in fake.calls("oauth.v2.access") if c.args.get("grant_type")]
    assert refreshes and refreshes[0].args["grant_type"] == "refresh_token"
    tokens = {token for _, _, token in installed_teams(database_url)}
    assert first not in tokens  # the store holds the new token
    posts = posts_on(fake, CHANNEL_A)
    assert posts and all(c.status == 200 and fake.team_of(c) == TEAM_A for c in posts)
    assert all(c.headers["Authorization"] != f"Bearer {first}" for c in posts)


async def test_an_org_wide_install_serves_the_workspaces_of_its_org(
    bot: SlackBot, database_url: str
):
    fake = bot.fake
    fake.add_channel("C0GRID", "T0GGG", enterprise="E0GRID")
    await install(bot, fake, None, enterprise="E0GRID", org=True)
    assert installed_teams(database_url)[0][:2] == ("E0GRID", None)
    fake_answer(bot).respond_with(lambda body: answer("grid hello"))
    event = from_team(mention("hi", channel="C0GRID"), "T0GGG", enterprise="E0GRID", org=True)
    assert await bot.send(event) == 200
    await bot.wait_idle()
    posts = posts_on(fake, "C0GRID")
    assert posts and all(c.status == 200 for c in posts)


def test_half_an_oauth_configuration_does_not_start():
    half = Settings(_env_file=None, slack_client_id=CLIENT_ID, slack_signing_secret=SIGNING_SECRET)
    with pytest.raises(StartupError, match="SLACK_CLIENT_SECRET"):
        create_app(half)
    both = half.model_copy(update={"slack_client_secret": "s", "slack_bot_token": "xoxb-1"})
    with pytest.raises(StartupError, match="not both"):
        create_app(both)


# helpers --------------------------------------------------------------------------------


def fake_answer(bot: SlackBot) -> FakeOpenAI:
    """The FakeOpenAI the bot's model points at (its base URL is in the settings)."""
    return bot.openai  # type: ignore[attr-defined,no-any-return]


def card_in_channel(fake: FakeSlack, channel: str, root: str) -> dict[str, Any] | None:
    for message in fake.thread_messages(channel, root):
        blocks = message.get("blocks", [])
        if blocks and blocks[0].get("type") == "header":
            return message
    return None


def uninstall_event() -> dict[str, Any]:
    envelope = mention("x")
    envelope["event"] = {"type": "app_uninstalled", "event_ts": "1710000000.000001"}
    return envelope


def revoked_event(*, oauth: list[str], bot: list[str]) -> dict[str, Any]:
    envelope = mention("x")
    envelope["event"] = {"type": "tokens_revoked", "tokens": {"oauth": oauth, "bot": bot},
                         "event_ts": "1710000000.000002"}  # fmt: skip
    return envelope


async def call_rows(bot: SlackBot) -> list[CallLog]:
    from sqlmodel import select

    db = bot.app[RUNTIME_KEY].db
    return await db.run(lambda s: list(s.exec(select(CallLog))))


async def run_rows(bot: SlackBot) -> list[Run]:
    from sqlmodel import select

    db = bot.app[RUNTIME_KEY].db
    return await db.run(lambda s: list(s.exec(select(Run))))
