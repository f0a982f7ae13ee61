"""Per-user OAuth credentials on Slack, end to end: the real app, signed events, FakeSlack, the
fake model, and a fake OAuth provider whose API records whose token each request carried.

A person who has not connected gets the connect link in an ephemeral message (only to them),
the run waits with its status saying so, and goes on once a real browser (cookie jar, redirects)
has gone through the bot's start route, the provider and the bot's callback. Forged, replayed,
expired and other-browser callbacks are refused and store nothing; tokens are encrypted in the
database, refreshed before expiry and after a 401; an approved call acting as the approver
carries the approver's token; `chatops credentials revoke` revokes at the provider. SQLite and
PostgreSQL.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import unused_port
from cryptography.fernet import Fernet
from sqlalchemy import create_engine, text

from bot.cli import main
from bot.server import RUNTIME_KEY, create_app
from bot.surfaces.slack.cards import APPROVE_ACTION
from connectors.oauth_vault import Person
from tests.fakes.oauth_provider import BOT_TOKEN as GH_BOT_TOKEN
from tests.fakes.oauth_provider import (
    CLIENT_ID,
    CLIENT_SECRET,
    FakeOAuthProvider,
    browser,
    callback_url,
    gh_manifest,
    open_link,
)
from tests.fakes.openai_server import FakeOpenAI, Turn, answer, tool_call
from tests.fakes.serving import started
from tests.fakes.slack_api import TEAM_ID, FakeSlack
from tests.slack.e2e import SlackBot, bot_settings, wait_card
from tests.slack.payloads import CHANNEL, mention

pytestmark = pytest.mark.both_databases

KEY = Fernet.generate_key().decode()
LINK_RE = re.compile(r"http://127\.0\.0\.1:\d+/oauth/gh/start\?link=[A-Za-z0-9_-]+")


@pytest.fixture
async def provider() -> AsyncIterator[FakeOAuthProvider]:
    async with started(FakeOAuthProvider()) as fake:
        yield fake


@pytest.fixture
def port() -> int:
    return unused_port()


@pytest.fixture
def settings(tmp_path: Path, database_url: str, provider, fake_slack, fake_openai, port,
             monkeypatch):  # fmt: skip
    monkeypatch.setenv("GH_CLIENT_ID", CLIENT_ID)
    monkeypatch.setenv("GH_CLIENT_SECRET", CLIENT_SECRET)
    monkeypatch.setenv("GH_BOT_TOKEN", GH_BOT_TOKEN)
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    (manifests / "gh.yaml").write_text(gh_manifest(provider.url))
    provider.redirect_uri = f"http://127.0.0.1:{port}/oauth/gh/callback"
    return bot_settings(
        database_url=database_url, manifests=manifests, slack=fake_slack,
        llm_url=fake_openai.base_url, chatops_credentials_key=KEY,
        chatops_public_url=f"http://127.0.0.1:{port}", chatops_oauth_wait_s=20.0,
    )  # fmt: skip


@pytest.fixture
async def bot(aiohttp_client, settings, fake_slack, port) -> SlackBot:
    app = create_app(settings)
    return SlackBot(await aiohttp_client(app, server_kwargs={"port": port}), fake_slack)


def call_then_answer(name: str, args: dict[str, Any]) -> Any:
    def respond(body: dict[str, Any]) -> Turn:
        if body.get("stream"):
            return answer("Done.")
        if any(m["role"] == "tool" for m in body["messages"]):
            return answer("done")
        return tool_call(name, args, id=f"call_{name}")

    return respond


async def link_for(bot: SlackBot, user: str) -> str:
    oauth = bot.app[RUNTIME_KEY].oauth
    assert oauth is not None
    return await oauth.create_link("gh", Person("slack", TEAM_ID, user))


def rows(database_url: str, sql: str) -> list[Any]:
    engine = create_engine(database_url)
    try:
        with engine.connect() as conn:
            return list(conn.execute(text(sql)))
    finally:
        engine.dispose()


async def wait_ephemeral(fake: FakeSlack, user: str) -> dict[str, Any]:
    return await fake.wait_for(
        lambda: next((e for e in fake.ephemeral if e.get("user") == user), None), 15
    )


def everything_slack_saw(fake: FakeSlack) -> str:
    return json.dumps([call.args for call in fake.calls()])


async def test_link_then_run_goes_on_with_the_persons_token(
    bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, provider, database_url
):
    fake_openai.respond_with(call_then_answer("gh__whoami", {}))
    event = mention("who am I on gh?", user="U0DEV")
    root = event["event"]["ts"]
    await bot.send(event)

    note = await wait_ephemeral(fake_slack, "U0DEV")
    assert note["channel"] == CHANNEL and note["thread_ts"] == root
    link = LINK_RE.search(note["text"])
    assert link is not None, note["text"]
    public = json.dumps([c.args for c in fake_slack.calls("chat.postMessage")])
    public += json.dumps([c.args for c in fake_slack.calls("chat.update")])
    assert link.group(0) not in public  # the link went to U0DEV alone
    await fake_slack.wait_for(
        lambda: any("Waiting for U0DEV to connect gh" in c.args.get("text", "")
                    for c in fake_slack.calls("chat.update")), 15,
    )  # fmt: skip
    assert provider.api_calls == []  # the run waits

    status, page = await open_link(link.group(0))
    assert status == 200 and "Connected" in page
    await bot.wait_idle()
    assert provider.api_calls == [("GET", "/api/user", "octo-dev")]

    owner = f"slack:{TEAM_ID}:U0DEV"
    logged = rows(database_url, "SELECT credential_owner, result_status FROM call_log")
    assert [tuple(r) for r in logged] == [(owner, "ok")]
    stored = rows(database_url, "SELECT owner, secret FROM user_credential")
    assert [r[0] for r in stored] == [owner]
    for token in provider.tokens_of("octo-dev"):  # encrypted at rest, and shown nowhere
        assert token not in stored[0][1]
        assert token not in everything_slack_saw(fake_slack)
        assert token not in json.dumps([list(map(str, r)) for r in rows(
            database_url, "SELECT arguments, observation, error FROM call_log")])  # fmt: skip
        assert token not in json.dumps(fake_openai.requests)


async def test_expired_token_is_refreshed_before_use_and_after_a_401(
    bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, provider
):
    provider.expires_in = 30  # within the bot's one-minute margin: refreshed before use
    status, _ = await open_link(await link_for(bot, "U0DEV"))
    assert status == 200
    first = provider.live_tokens()
    fake_openai.respond_with(call_then_answer("gh__whoami", {}))
    await bot.send(mention("who am I?", user="U0DEV"))
    await bot.wait_idle()
    grants = [r["grant_type"] for r in provider.token_requests]
    assert grants == ["authorization_code", "refresh_token"]
    assert provider.api_calls == [("GET", "/api/user", "octo-dev")]
    assert provider.api_tokens[0] not in first  # the refreshed token, not the expiring one

    provider.expires_in = 3600  # the next token looks fresh to the bot...
    await bot.send(mention("again", user="U0DEV"))
    await bot.wait_idle()
    assert [r["grant_type"] for r in provider.token_requests][-1] == "refresh_token"
    provider.expire_access_tokens()  # ...but the provider ended it: a 401, one refresh, retry
    await bot.send(mention("and again", user="U0DEV"))
    await bot.wait_idle()
    assert len(provider.api_calls) == 3
    assert [r["grant_type"] for r in provider.token_requests].count("refresh_token") == 3


async def test_forged_replayed_and_other_browser_callbacks_are_refused(
    bot: SlackBot, provider, database_url
):
    async with (
        browser() as attacker,
        attacker.get(
            f"{bot.client.make_url('/oauth/gh/callback')}?code=x&state=forged-state"
        ) as forged,
    ):
        assert forged.status == 400
        assert "not one the bot started" in await forged.text()

    async with browser() as victim, browser() as other:
        url = await callback_url(victim, await link_for(bot, "U0DEV"))
        # someone else's browser (another user who got hold of the callback URL) is refused,
        # before the code is exchanged
        status, page = await open_link(url, other)
        assert status == 400 and "another browser" in page
        assert provider.token_requests == []
        assert rows(database_url, "SELECT owner FROM user_credential") == []
        # the person's own browser completes it once; a replay is refused
        status, _ = await open_link(url, victim)
        assert status == 200
        status, page = await open_link(url, victim)
        assert status == 400 and "already used" in page
    assert [r["grant_type"] for r in provider.token_requests] == ["authorization_code"]
    assert len(rows(database_url, "SELECT owner FROM user_credential")) == 1


async def test_a_link_can_be_opened_only_while_unused_and_unexpired(bot: SlackBot, provider):
    link = await link_for(bot, "U0DEV")
    assert (await open_link(link))[0] == 200
    status, page = await open_link(link)
    assert status == 400 and "used or has expired" in page
    status, page = await open_link(link.split("?")[0] + "?link=not-a-link")
    assert status == 400 and "not valid" in page


async def test_approved_call_runs_with_the_approvers_credentials(
    bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, provider, database_url
):
    provider.login = "octo-dev"
    assert (await open_link(await link_for(bot, "U0DEV")))[0] == 200  # the requester is linked
    fake_openai.respond_with(call_then_answer("gh__deploy", {"name": "api"}))
    event = mention("deploy api", user="U0DEV")
    root = event["event"]["ts"]
    await bot.send(event)
    card = await wait_card(fake_slack, root, pending=True)
    await bot.click(card, APPROVE_ACTION, user="U0LEAD")
    note = await wait_ephemeral(fake_slack, "U0LEAD")  # the approver is asked to connect
    provider.login = "octo-lead"
    link = LINK_RE.search(note["text"])
    assert link is not None
    assert (await open_link(link.group(0)))[0] == 200
    await bot.wait_idle()
    assert provider.api_calls == [("POST", "/api/deploy/api", "octo-lead")]
    logged = rows(database_url, "SELECT credential_owner, approvers FROM call_log")
    assert logged[0][0] == f"slack:{TEAM_ID}:U0LEAD"


async def test_fallback_bot_uses_the_bots_token_without_asking(
    bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, provider, database_url
):
    fake_openai.respond_with(call_then_answer("gh__status", {}))
    await bot.send(mention("status?", user="U0NEW"))
    await bot.wait_idle()
    assert provider.api_calls == [("GET", "/api/status", "chatops-bot")]
    assert fake_slack.ephemeral == []
    assert [r[0] for r in rows(database_url, "SELECT credential_owner FROM call_log")] == ["bot"]


async def test_not_connected_in_time_the_call_does_not_run(
    aiohttp_client, settings, fake_slack: FakeSlack, fake_openai: FakeOpenAI, provider, port,
    database_url,
):  # fmt: skip
    quick = settings.model_copy(update={"chatops_oauth_wait_s": 0.5})
    bot = SlackBot(
        await aiohttp_client(create_app(quick), server_kwargs={"port": port}), fake_slack
    )
    fake_openai.respond_with(call_then_answer("gh__whoami", {}))
    await bot.send(mention("who am I?", user="U0DEV"))
    await bot.wait_idle()
    assert provider.api_calls == []
    told = [m["content"] for r in fake_openai.requests for m in r["messages"]
            if m["role"] == "tool"]  # fmt: skip
    assert any("did not connect it within" in str(t) for t in told)
    assert [tuple(r) for r in rows(database_url, "SELECT result_status FROM call_log")] == [
        ("blocked",)
    ]


async def test_credentials_list_and_revoke_from_the_command_line(
    bot: SlackBot, provider, database_url, settings, monkeypatch, capsys
):
    assert (await open_link(await link_for(bot, "U0DEV")))[0] == 200
    issued = provider.tokens_of("octo-dev")
    monkeypatch.setenv("DATABASE_URL", database_url)
    monkeypatch.setenv("CHATOPS_MANIFESTS_DIR", str(settings.chatops_manifests_dir))
    monkeypatch.setenv("CHATOPS_CREDENTIALS_KEY", KEY)
    assert await asyncio.to_thread(main, ["credentials", "list"]) == 0
    listed = capsys.readouterr().out
    assert f"gh\tslack:{TEAM_ID}:U0DEV" in listed
    assert not any(token in listed for token in issued)
    assert await asyncio.to_thread(main, ["credentials", "revoke", "--user", "U0DEV"]) == 0
    assert set(provider.revoked) == set(issued)
    assert provider.live_tokens() == []
    assert rows(database_url, "SELECT owner FROM user_credential") == []


async def test_a_person_disconnects_their_own_account_from_chat(
    bot: SlackBot, fake_openai: FakeOpenAI, provider, database_url
):
    assert (await open_link(await link_for(bot, "U0DEV")))[0] == 200
    assert (await open_link(await link_for(bot, "U0LEAD")))[0] == 200
    lead_tokens = set(provider.tokens_of("octo-dev")) - set(provider.revoked)
    fake_openai.respond_with(call_then_answer("credentials__disconnect", {"connector": "gh"}))
    await bot.send(mention("disconnect gh", user="U0DEV"))
    await bot.wait_idle()
    owners = [r[0] for r in rows(database_url, "SELECT owner FROM user_credential")]
    assert owners == [f"slack:{TEAM_ID}:U0LEAD"]  # only the asker's own account went
    assert len(provider.revoked) == 2 and lead_tokens - set(provider.revoked)
