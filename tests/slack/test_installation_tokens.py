"""Slack installations' tokens are sealed at rest with CHATOPS_CREDENTIALS_KEY (the key of
people's connector credentials), on SQLite and PostgreSQL.

Installs go through `/slack/install` and `/slack/oauth_redirect` against FakeSlack; the raw
rows are read with SQL, as someone holding a copy of the database would. The migration that
seals older rows (0026) runs through `bot.storage.migrate`, as `chatops serve` runs it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from alembic import command
from cryptography.fernet import Fernet
from slack_sdk.oauth.installation_store import Installation
from slack_sdk.oauth.installation_store.sqlalchemy import SQLAlchemyInstallationStore
from sqlalchemy import create_engine

from bot.cli import main
from bot.errors import StartupError
from bot.server import create_app
from bot.storage import migrate
from bot.storage.database import Database, create_db_engine
from bot.storage.sealing import Sealer
from bot.storage.slack_installs import DatabaseInstallationStore
from tests.fakes.openai_server import FakeOpenAI, answer
from tests.fakes.ops_api import OpsAPI
from tests.fakes.slack_api import FakeSlack
from tests.server.test_serve import free_port
from tests.slack.e2e import SlackBot
from tests.slack.payloads import SIGNING_SECRET, mention
from tests.slack.test_workspaces import posts_on
from tests.slack.workspaces import (
    CHANNEL_A,
    CLIENT_ID,
    CLIENT_SECRET,
    CREDENTIALS_KEY,
    TEAM_A,
    TEAM_B,
    from_team,
    install,
    installed_teams,
    oauth_settings,
    raw_rows,
    two_workspaces,
)

BEFORE = "0025_report_run_outcome"  # the revision before the tokens were sealed


@pytest.fixture
async def bot(
    aiohttp_client: Any, database_url: str, tmp_path: Path, ops_api: OpsAPI,
    fake_slack: FakeSlack, fake_openai: FakeOpenAI,
) -> SlackBot:  # fmt: skip
    two_workspaces(fake_slack)
    settings = oauth_settings(
        database_url=database_url, directory=tmp_path, ops_url=ops_api.url, slack=fake_slack,
        llm_url=fake_openai.base_url,
    )  # fmt: skip
    bot = SlackBot(await aiohttp_client(create_app(settings)), fake_slack)
    bot.openai = fake_openai  # type: ignore[attr-defined]
    return bot


def secrets_of(fake: FakeSlack) -> list[str]:
    """Every token and refresh token FakeSlack ever issued."""
    issued = [token for token in fake.grants if token.startswith("xox")]
    issued += [g.refresh for g in fake.grants.values() if getattr(g, "refresh", None)]
    return issued


def leaked(database_url: str, secrets: list[str]) -> list[str]:
    """The secrets found in any column of the installation tables, as stored."""
    stored = " ".join(
        str(value)
        for table in ("slack_installations", "slack_bots")
        for row in raw_rows(database_url, table)
        for value in row.values()
    )
    return [secret for secret in secrets if secret in stored]


@pytest.mark.both_databases
async def test_the_rows_hold_no_token_and_rotation_still_works(bot: SlackBot, database_url: str):
    fake = bot.fake
    fake.token_lifetime_s = 60  # inside the rotation window: the first use refreshes it
    await install(bot, fake, TEAM_A, rotation=True)
    await install(bot, fake, TEAM_B)
    issued = secrets_of(fake)
    assert len(issued) >= 3 and leaked(database_url, issued) == []
    [(_, _, first)] = [row for row in installed_teams(database_url) if row[1] == TEAM_A]
    assert first in fake.tokens_of(TEAM_A)  # sealed with the key, and it opens

    bot.openai.respond_with(lambda body: answer("rotated"))  # type: ignore[attr-defined]
    await bot.send(from_team(mention("hi", channel=CHANNEL_A), TEAM_A))
    await bot.wait_idle()
    assert [c for c in fake.calls("oauth.v2.access") if c.args.get("grant_type")]
    posts = posts_on(fake, CHANNEL_A)
    assert posts and all(c.status == 200 and fake.team_of(c) == TEAM_A for c in posts)
    assert all(c.headers["Authorization"] != f"Bearer {first}" for c in posts)  # the new one
    issued = secrets_of(fake)
    assert leaked(database_url, issued) == []  # the refreshed tokens are sealed too
    assert first not in {token for _, _, token in installed_teams(database_url)}


def plain_installation(team: str) -> Installation:
    return Installation(
        app_id="A0APP", team_id=team, bot_token=f"xoxb-plain-{team}", bot_id="B0BOT",
        bot_user_id="U0BOT", bot_refresh_token=f"xoxe-1-refresh-{team}", user_id="U0INSTALLER",
        user_token=f"xoxp-plain-{team}", incoming_webhook_url=f"https://hooks.slack.test/{team}",
    )  # fmt: skip


@pytest.mark.both_databases
@pytest.mark.empty_database
async def test_the_migration_seals_older_rows_and_its_downgrade_opens_them(database_url: str):
    plain = plain_installation(TEAM_A)
    secrets = [plain.bot_token, plain.bot_refresh_token, plain.user_token]
    secrets.append(plain.incoming_webhook_url)
    engine = create_db_engine(database_url)
    try:
        with engine.begin() as conn:
            command.upgrade(migrate.alembic_config(conn), BEFORE)
        SQLAlchemyInstallationStore(client_id=CLIENT_ID, engine=engine).save(plain)
        assert len(leaked(database_url, secrets)) == 4  # what an older version left

        with pytest.raises(StartupError, match="CHATOPS_CREDENTIALS_KEY"):
            migrate.upgrade(engine)  # rows to seal, no key: stops, changes nothing
        assert migrate.current_revision(engine) == BEFORE
        assert len(leaked(database_url, secrets)) == 4

        migrate.upgrade(engine, credentials_key=CREDENTIALS_KEY)
        assert leaked(database_url, secrets) == []
        database = Database(engine)
        try:
            store = DatabaseInstallationStore(database, CLIENT_ID, Sealer(CREDENTIALS_KEY))
            found = await store.async_find_installation(enterprise_id=None, team_id=TEAM_A)
            assert found is not None and found.bot_token == plain.bot_token
            assert found.user_token == plain.user_token
            assert found.incoming_webhook_url == plain.incoming_webhook_url
            await store.check_key()
            other = DatabaseInstallationStore(
                database, CLIENT_ID, Sealer(Fernet.generate_key().decode())
            )
            with pytest.raises(StartupError, match="does not decrypt the stored Slack"):
                await other.check_key()
        finally:
            database.close()

        with engine.begin() as conn:
            config = migrate.alembic_config(conn, credentials_key=CREDENTIALS_KEY)
            command.downgrade(config, BEFORE)
        assert len(leaked(database_url, secrets)) == 4  # plain again, for the older version
        found = SQLAlchemyInstallationStore(client_id=CLIENT_ID, engine=engine).find_installation(
            enterprise_id=None, team_id=TEAM_A
        )
        assert found is not None and found.bot_token == plain.bot_token
    finally:
        engine.dispose()


def test_a_missing_malformed_or_wrong_key_stops_serve_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'bot.db'}"
    monkeypatch.chdir(tmp_path)
    for name, value in {
        "DATABASE_URL": url, "SLACK_CLIENT_ID": CLIENT_ID,
        "SLACK_CLIENT_SECRET": CLIENT_SECRET, "SLACK_SIGNING_SECRET": SIGNING_SECRET,
    }.items():  # fmt: skip
        monkeypatch.setenv(name, value)
    serve = ["serve", "--host", "127.0.0.1", "--port", str(free_port())]

    def refused(said: str) -> None:
        assert main(serve) == 2
        err = capsys.readouterr().err
        assert said in err and "Traceback" not in err, err
        assert err.strip().splitlines()[-1].startswith("chatops: error: "), err

    refused("Slack OAuth installs keep their tokens encrypted: set CHATOPS_CREDENTIALS_KEY")
    monkeypatch.setenv("CHATOPS_CREDENTIALS_KEY", "not-a-fernet-key")
    refused("CHATOPS_CREDENTIALS_KEY is not a Fernet key")

    engine = create_engine(url)  # an install stored under the key of yesterday
    try:
        migrate.upgrade(engine)
        sealer = Sealer(CREDENTIALS_KEY)
        plain = plain_installation(TEAM_A)
        plain.bot_token = sealer.seal(plain.bot_token or "")
        plain.bot_refresh_token = sealer.seal(plain.bot_refresh_token or "")
        SQLAlchemyInstallationStore(client_id=CLIENT_ID, engine=engine).save(plain)
    finally:
        engine.dispose()
    monkeypatch.setenv("CHATOPS_CREDENTIALS_KEY", Fernet.generate_key().decode())
    refused("CHATOPS_CREDENTIALS_KEY does not decrypt the stored Slack installations")
