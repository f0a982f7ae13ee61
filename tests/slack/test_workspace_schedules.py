"""Scheduled audit reports and triggers with Slack OAuth installs (many workspaces, no bot
token of the bot's own), through the real entry points.

The app is `bot.server.create_app` in OAuth mode with two workspaces installed through
`/slack/install` against FakeSlack; the audit schedule's stored job is made due and fires
through APScheduler like in production (tests/audit/test_scheduled_post.py); triggers are
POSTed to `/hooks/<name>`. FakeSlack refuses a token on another team's channel, so a crossed
token fails the test. Every test runs on SQLite and PostgreSQL.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from cryptography.fernet import Fernet
from pydantic import SecretStr
from sqlalchemy import create_engine, text

from bot.audit.schedule import AUDIT_JOB_ID, AuditSchedulerContext
from bot.cli import main
from bot.errors import StartupError
from bot.server import create_app
from tests.fakes.openai_server import FakeOpenAI, answer
from tests.fakes.ops_api import OpsAPI
from tests.fakes.slack_api import FakeSlack
from tests.server.test_serve import free_port
from tests.slack.e2e import SlackBot
from tests.slack.payloads import mention
from tests.slack.test_workspaces import restart_in_a_status_in_b
from tests.slack.workspaces import (
    CHANNEL_A,
    CHANNEL_B,
    CLIENT_ID,
    CLIENT_SECRET,
    TEAM_A,
    TEAM_B,
    from_team,
    install,
    oauth_settings,
    two_workspaces,
)

pytestmark = pytest.mark.both_databases

TEAM_C, CHANNEL_C = "T0CCC", "C0CCC"  # a workspace named in the settings, never installed
HOOK_TOKEN = "hook-token-for-tests-0123456789"


def trigger_file(name: str, team: str, channel: str) -> str:
    return (
        f"name: {name}\nsource: alertmanager\nsecret_env: WS_HOOK_TOKEN\n"
        f"where:\n  platform: slack\n  channel: {channel}\n"
        + (f"  workspace: {team}\n" if team else "")
        + 'request: "look at {{ alert.labels.service }}"\n'
    )


def alert(fingerprint: str) -> bytes:
    firing = {
        "status": "firing", "labels": {"alertname": "Down", "service": "api"},
        "annotations": {"summary": "api is down"}, "startsAt": "2026-12-04T07:00:00Z",
        "endsAt": "0001-01-01T00:00:00Z", "generatorURL": "", "fingerprint": fingerprint,
    }  # fmt: skip
    return json.dumps({
        "version": "4", "groupKey": "{}:{}", "truncatedAlerts": 0, "status": "firing",
        "receiver": "chatops", "groupLabels": {}, "commonLabels": {}, "commonAnnotations": {},
        "externalURL": "http://am", "alerts": [firing],
    }).encode()  # fmt: skip


@pytest.fixture
async def bot(
    aiohttp_client: Any, database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    ops_api: OpsAPI, fake_slack: FakeSlack, fake_openai: FakeOpenAI,
) -> SlackBot:  # fmt: skip
    two_workspaces(fake_slack)
    fake_slack.add_channel(CHANNEL_C, TEAM_C)
    triggers = tmp_path / "triggers"
    triggers.mkdir()
    (triggers / "a.yaml").write_text(trigger_file("alerts-a", TEAM_A, CHANNEL_A))
    (triggers / "c.yaml").write_text(trigger_file("alerts-c", TEAM_C, CHANNEL_C))
    monkeypatch.setenv("WS_HOOK_TOKEN", HOOK_TOKEN)
    settings = oauth_settings(
        database_url=database_url, directory=tmp_path, ops_url=ops_api.url, slack=fake_slack,
        llm_url=fake_openai.base_url, chatops_triggers_dir=triggers,
        chatops_audit_schedule="0 9 * * MON",
        chatops_audit_channels=f"slack:{TEAM_A}:{CHANNEL_A},slack:{TEAM_B}:{CHANNEL_B},"
        f"slack:{TEAM_C}:{CHANNEL_C}",
    )  # fmt: skip
    app = create_app(settings)
    bot = SlackBot(await aiohttp_client(app), fake_slack)
    bot.openai = fake_openai  # type: ignore[attr-defined]
    bot.context = next(c for c in app.cleanup_ctx if isinstance(c, AuditSchedulerContext))  # type: ignore[attr-defined]
    return bot


def reports_on(fake: FakeSlack, channel: str) -> list[Any]:
    return [
        c for c in fake.calls("chat.postMessage")
        if c.args.get("channel") == channel and str(c.args.get("text", "")).startswith("Audit")
    ]  # fmt: skip


async def until(predicate: Any, timeout: float = 10.0) -> Any:  # noqa: ASYNC109
    """Poll `predicate` (a database read: no Slack call wakes FakeSlack's waiters)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not (value := predicate()):
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.05)
    return value


def outcomes(database_url: str) -> list[str]:
    engine = create_engine(database_url)
    try:
        with engine.connect() as conn:
            return list(conn.execute(text("SELECT outcome FROM scheduled_report_run")).scalars())
    finally:
        engine.dispose()


async def test_a_scheduled_report_posts_in_each_workspace_with_its_own_token(
    bot: SlackBot, database_url: str, caplog: pytest.LogCaptureFixture
):
    fake = bot.fake
    await install(bot, fake, TEAM_A)
    await install(bot, fake, TEAM_B)
    bot.openai.respond_with(restart_in_a_status_in_b)  # type: ignore[attr-defined]
    await bot.send(from_team(mention("status of db", user="U0BOB", channel=CHANNEL_B), TEAM_B))
    await bot.wait_idle()
    await asyncio.sleep(1.1)  # the firing's window ends at its (whole second) fire time
    scheduler = bot.context.scheduler  # type: ignore[attr-defined]
    scheduler.scheduler.pause()
    due = datetime.now(UTC).replace(microsecond=0)
    scheduler.scheduler.modify_job(AUDIT_JOB_ID, next_run_time=due)
    scheduler.scheduler.resume()

    [on_a] = await fake.wait_for(lambda: reports_on(fake, CHANNEL_A))
    [on_b] = await fake.wait_for(lambda: reports_on(fake, CHANNEL_B))
    assert on_a.status == 200 and fake.team_of(on_a) == TEAM_A  # A's token, on A's channel
    assert on_b.status == 200 and fake.team_of(on_b) == TEAM_B
    assert "U0BOB" not in json.dumps(on_a.args["blocks"])  # A's report: A's calls alone
    assert "U0BOB" in json.dumps(on_b.args["blocks"])
    assert reports_on(fake, CHANNEL_C) == []  # never installed: nothing posted, no token used
    [outcome] = await until(lambda: [o for o in outcomes(database_url) if o])
    assert f"posted to slack:{TEAM_A}:{CHANNEL_A}, slack:{TEAM_B}:{CHANNEL_B}" in outcome
    assert f"failed: slack:{TEAM_C}:{CHANNEL_C}: the slack workspace {TEAM_C} has no " in outcome
    logged = [r for r in caplog.records if TEAM_C in r.getMessage()]
    assert logged and all(r.exc_info is None for r in logged)  # one clear line, no traceback
    ready = await (await bot.client.get("/readyz")).json()
    assert ready["audit_schedule"]["last"]["posted_to"] == [
        f"slack:{TEAM_A}:{CHANNEL_A}",
        f"slack:{TEAM_B}:{CHANNEL_B}",
    ]
    [why] = ready["audit_schedule"]["last"]["failed"]
    assert "has no installation" in why and ready["audit_schedule"]["next_run"]


async def test_a_trigger_opens_its_thread_with_its_workspaces_token(bot: SlackBot):
    fake = bot.fake
    await install(bot, fake, TEAM_A)
    bot.openai.respond_with(lambda body: answer("looked"))  # type: ignore[attr-defined]
    headers = {"Authorization": f"Bearer {HOOK_TOKEN}", "Content-Type": "application/json"}
    response = await bot.client.post("/hooks/alerts-a", data=alert("f1"), headers=headers)
    assert response.status == 200 and (await response.json())["started"] == 1
    await bot.wait_idle()
    posts = [c for c in fake.calls("chat.postMessage") if c.args.get("channel") == CHANNEL_A]
    assert posts and all(c.status == 200 and fake.team_of(c) == TEAM_A for c in posts)

    refused = await bot.client.post("/hooks/alerts-c", data=alert("f2"), headers=headers)
    assert refused.status == 503
    assert f"workspace {TEAM_C} has no installation" in (await refused.json())["error"]
    assert not [c for c in fake.calls() if c.args.get("channel") == CHANNEL_C]
    await install(bot, fake, TEAM_C)  # installed later: the sender's retry goes through
    again = await bot.client.post("/hooks/alerts-c", data=alert("f2"), headers=headers)
    assert again.status == 200 and (await again.json())["started"] == 1


def test_a_slack_entry_without_its_workspace_stops_serve_with_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    monkeypatch.chdir(tmp_path)
    for name, value in {
        "DATABASE_URL": f"sqlite:///{tmp_path / 'bot.db'}",
        "SLACK_CLIENT_ID": CLIENT_ID, "SLACK_CLIENT_SECRET": CLIENT_SECRET,
        "SLACK_SIGNING_SECRET": "test-signing-secret",
        "CHATOPS_AUDIT_SCHEDULE": "0 9 * * MON",
        "CHATOPS_AUDIT_CHANNELS": f"slack:{TEAM_A}:{CHANNEL_A},slack:{CHANNEL_B}",
        "CHATOPS_CREDENTIALS_KEY": Fernet.generate_key().decode(),
    }.items():  # fmt: skip
        monkeypatch.setenv(name, value)
    serve = ["serve", "--host", "127.0.0.1", "--port", str(free_port())]
    assert main(serve) == 2
    err = capsys.readouterr().err
    assert f"CHATOPS_AUDIT_CHANNELS entry 'slack:{CHANNEL_B}' names no Slack workspace" in err
    assert "Traceback" not in err

    monkeypatch.setenv("CHATOPS_AUDIT_CHANNELS", f"slack:{TEAM_A}:{CHANNEL_A}")
    triggers = tmp_path / "triggers"
    triggers.mkdir()
    (triggers / "nowhere.yaml").write_text(trigger_file("nowhere", "", CHANNEL_A))
    monkeypatch.setenv("CHATOPS_TRIGGERS_DIR", str(triggers))
    assert main(serve) == 2
    err = capsys.readouterr().err
    assert f"{triggers / 'nowhere.yaml'}: field 'where.workspace'" in err
    assert "Traceback" not in err
    assert main(["triggers", "validate"]) != 0  # the check the operator runs says it too


def test_single_token_mode_keeps_platform_channel_entries(tmp_path: Path) -> None:
    from bot.config import Settings

    settings = Settings(
        _env_file=None, database_url=f"sqlite:///{tmp_path / 'b.db'}",
        slack_bot_token="xoxb-one", slack_signing_secret="s",
        chatops_audit_schedule="0 9 * * MON", chatops_audit_channels="slack:C1,feishu:oc_1",
    )  # fmt: skip
    create_app(settings)  # builds: one workspace, its channel by id alone
    oauth = settings.model_copy(
        update={"slack_bot_token": None, "slack_client_id": CLIENT_ID,
                "slack_client_secret": settings.slack_signing_secret,
                "chatops_credentials_key": SecretStr(Fernet.generate_key().decode())}
    )  # fmt: skip
    with pytest.raises(StartupError, match="names no Slack workspace"):
        create_app(oauth)
