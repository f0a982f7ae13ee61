"""Two (or more) fake workspaces on one deployment: OAuth settings, the install flow through
`/slack/install` and `/slack/oauth_redirect`, and payloads from a given team."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode

from sqlalchemy import create_engine, text

from bot.config import Settings
from bot.storage.sealing import Sealer
from tests.fakes.ops_api import ops_manifest
from tests.fakes.slack_api import FakeSlack
from tests.slack.e2e import SlackBot
from tests.slack.payloads import SIGNING_SECRET

CLIENT_ID = "1111.2222"
CLIENT_SECRET = "oauth-client-secret-not-real"
REDIRECT = "https://chatops.example/slack/oauth_redirect"
TEAM_A, CHANNEL_A = "T0AAA", "C0AAA"
TEAM_B, CHANNEL_B = "T0BBB", "C0BBB"
# CHATOPS_CREDENTIALS_KEY of the tests (a Fernet key): installation tokens are sealed with it
CREDENTIALS_KEY = "3q2-7wV9ZPvS8hJqkN5b0cXyT1mR4uL6aE2dW8fG0iQ="


def oauth_settings(
    *, database_url: str, directory: Path, ops_url: str, slack: FakeSlack, llm_url: str,
    **extra: Any,
) -> Settings:  # fmt: skip
    """The bot in OAuth mode (no SLACK_BOT_TOKEN) on the ops manifest (anyone approves)."""
    manifests = directory / "manifests"
    manifests.mkdir(exist_ok=True)
    (manifests / "ops.yaml").write_text(ops_manifest(ops_url))
    return Settings(
        _env_file=None,
        database_url=database_url,
        chatops_manifests_dir=manifests,
        openai_base_url=llm_url,
        openai_api_key="sk-test-not-a-secret",
        chatops_model="fake-model",
        chatops_llm_max_retries=0,
        slack_client_id=CLIENT_ID,
        slack_client_secret=CLIENT_SECRET,
        slack_redirect_uri=REDIRECT,
        slack_signing_secret=SIGNING_SECRET,
        slack_api_url=slack.url,
        **{"chatops_credentials_key": CREDENTIALS_KEY, **extra},
    )


def two_workspaces(fake: FakeSlack) -> None:
    """The app registered with Slack; team A owns channel A, team B channel B."""
    fake.register_app(CLIENT_ID, CLIENT_SECRET, REDIRECT)
    fake.add_channel(CHANNEL_A, TEAM_A)
    fake.add_channel(CHANNEL_B, TEAM_B)


async def start_install(bot: SlackBot) -> tuple[str, str]:
    """`GET /slack/install`: (the state in the "Add to Slack" link, the state cookie)."""
    response = await bot.client.get("/slack/install")
    assert response.status == 200
    page = await response.text()
    link = re.search(r'href="(https://slack.com/oauth/v2/authorize\?[^"]+)"', page)
    assert link is not None, page
    query = dict(parse_qsl(link.group(1).split("?", 1)[1].replace("&amp;", "&")))
    assert query["client_id"] == CLIENT_ID
    cookie = response.headers["Set-Cookie"].split(";", 1)[0]  # Secure: sent by hand on http
    return query["state"], cookie


async def finish_install(bot: SlackBot, code: str, state: str, cookie: str) -> int:
    """Slack sends the installer back: `GET /slack/oauth_redirect?code=...&state=...`."""
    query = urlencode({"code": code, "state": state})
    response = await bot.client.get(
        f"/slack/oauth_redirect?{query}", headers={"Cookie": cookie}, allow_redirects=False
    )
    return response.status


async def install(bot: SlackBot, fake: FakeSlack, team: str | None, **grant: Any) -> None:
    """The whole install flow for `team` (`grant`: an org install, rotation)."""
    state, cookie = await start_install(bot)
    code = fake.authorize(team, client_id=CLIENT_ID, redirect_uri=REDIRECT, **grant)
    assert await finish_install(bot, code, state, cookie) in (200, 302)


def installed_teams(database_url: str) -> list[tuple[str | None, str | None, str]]:
    """(enterprise, team, bot token) of every stored installation (the token opened with the
    tests' key: the row holds it sealed)."""
    sealer = Sealer(CREDENTIALS_KEY)
    return [
        (row["enterprise_id"], row["team_id"], sealer.open(row["bot_token"]))
        for row in raw_rows(database_url, "slack_installations")
    ]


def raw_rows(database_url: str, table: str) -> list[dict[str, Any]]:
    """Every row of `table` as the database holds it."""
    engine = create_engine(database_url)
    try:
        with engine.connect() as conn:
            return [dict(row) for row in conn.execute(text(f"SELECT * FROM {table}")).mappings()]
    finally:
        engine.dispose()


def from_team(
    envelope: dict[str, Any], team: str, *, enterprise: str | None = None, org: bool = False
) -> dict[str, Any]:
    """An event envelope as Slack sends it for `team` (of Grid org `enterprise`)."""
    found = copy.deepcopy(envelope)
    found["team_id"] = team
    found["event"]["team"] = team
    found["authorizations"][0].update(team_id=None if org else team, enterprise_id=enterprise,
                                      is_enterprise_install=org)  # fmt: skip
    if enterprise:
        found["enterprise_id"] = enterprise
    return found


def slash_from(body: str, team: str) -> str:
    """A slash command's form, as sent from `team`."""
    fields = dict(parse_qsl(body))
    fields["team_id"] = team
    return urlencode(fields)


def click_from(body: str, team: str, *, user_team: str | None = None) -> str:
    """A `block_actions` form, as sent from `team` (a forged one keeps the card of another)."""
    payload = json.loads(dict(parse_qsl(body))["payload"])
    payload["team"] = {"id": team, "domain": team.lower()}
    payload["user"]["team_id"] = user_team or team
    return urlencode({"payload": json.dumps(payload)})
