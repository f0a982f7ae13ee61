"""Audit reports and the workspace they are asked in (issue 35, item 4), through the real entry
points: signed events and slash commands on `/slack/events`, the model on FakeOpenAI.

With OAuth installs a report asked of the agent in a direct message covers the viewer's own
workspace alone, and that workspace's entry of `CHATOPS_WORKSPACES_FILE` says who may see it.
With one bot token, `/chatops-audit` and the agent's `audit__report` both ask the team id's
entry (the default when the team is not listed); the report still covers every workspace's
calls there, as it always has. Every test runs on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import Session

from bot.clock import utcnow
from bot.server import create_app
from bot.storage.database import open_database
from bot.storage.models import CallLog, Conversation, Run
from tests.fakes.openai_server import FakeOpenAI, Turn, answer, tool_call
from tests.fakes.ops_api import OpsAPI
from tests.fakes.slack_api import TEAM_ID, FakeSlack
from tests.slack.e2e import SlackBot, bot_settings
from tests.slack.payloads import CHANNEL, mention, message, slash_command
from tests.slack.workspaces import (
    CHANNEL_A,
    CHANNEL_B,
    TEAM_A,
    TEAM_B,
    from_team,
    install,
    oauth_settings,
    two_workspaces,
)

pytestmark = pytest.mark.both_databases

DM_A, DM_B = "D0DEVA", "D0BOBB"  # a direct message with the bot in A, in B

# each workspace names its own viewer; nobody is one process-wide
OAUTH_POLICY = f"""\
workspaces:
  - platform: slack
    workspace: {TEAM_A}
    audit_viewers: [U0DEV]
  - platform: slack
    workspace: {TEAM_B}
    audit_viewers: [U0BOB]
"""


def status_or_report(body: dict[str, Any]) -> Turn:
    """'report ...' asks for the week's audit report; anything else reads a service."""
    if body.get("stream") or any(m["role"] == "tool" for m in body["messages"]):
        return answer("done")
    if "report" in json.dumps(body["messages"][-1]):
        return tool_call("audit__report", {"since": "7d"}, id="call_audit")
    return tool_call("ops__get_service", {"name": "db"}, id="call_status")


def fail_a_run_in(database_url: str, team: str, channel: str, error: str) -> None:
    """A run of `team` whose model failed: no call, only the run table knows it."""
    engine = open_database(database_url)
    with Session(engine) as session:
        conversation = Conversation(platform="slack", workspace=team, channel=channel, root="9.9")
        session.add(conversation)
        session.flush()
        assert conversation.id is not None
        session.add(
            Run(
                id="R-failed-" + team,
                conversation_id=conversation.id,
                requester="U0BOB",
                started_at=utcnow() - timedelta(minutes=5),
                status="failed",
                finished_at=utcnow() - timedelta(minutes=5),
                error=error,
            )  # fmt: skip
        )
        session.commit()
    engine.dispose()


def tool_results(fake: FakeOpenAI, since: int) -> str:
    return json.dumps(
        [m["content"] for r in fake.requests[since:] for m in r["messages"] if m["role"] == "tool"]
    )


async def test_the_agents_report_in_a_dm_never_lists_another_workspaces_calls(
    aiohttp_client: Any, database_url: str, tmp_path: Path, ops_api: OpsAPI,
    fake_slack: FakeSlack, fake_openai: FakeOpenAI,
) -> None:  # fmt: skip
    two_workspaces(fake_slack)
    fake_slack.add_channel(DM_A, TEAM_A)
    fake_slack.add_channel(DM_B, TEAM_B)
    policy = tmp_path / "workspaces.yaml"
    policy.write_text(OAUTH_POLICY)
    settings = oauth_settings(
        database_url=database_url, directory=tmp_path, ops_url=ops_api.url, slack=fake_slack,
        llm_url=fake_openai.base_url, chatops_workspaces_file=policy,
    )  # fmt: skip
    bot = SlackBot(await aiohttp_client(create_app(settings)), fake_slack)
    await install(bot, fake_slack, TEAM_A)
    await install(bot, fake_slack, TEAM_B)
    fake_openai.respond_with(status_or_report)
    # a call in each workspace: U0DEV's in A, U0BOB's in B
    await bot.send(from_team(mention("status of db", user="U0BOB", channel=CHANNEL_B), TEAM_B))
    await bot.send(from_team(mention("status of db", user="U0DEV", channel=CHANNEL_A), TEAM_A))
    await bot.wait_idle()
    fail_a_run_in(database_url, TEAM_B, CHANNEL_B, "B-only failure text")

    async def ask_in_dm(user: str, channel: str, team: str) -> str:
        before = len(fake_openai.requests)
        dm = message("report of the week please", user=user, channel=channel, channel_type="im")
        assert await bot.send(from_team(dm, team)) == 200
        await bot.wait_idle()
        return tool_results(fake_openai, before)

    in_a = await ask_in_dm("U0DEV", DM_A, TEAM_A)
    assert "## Totals" in in_a and "U0DEV" in in_a  # A's own call, requested by U0DEV
    assert "U0BOB" not in in_a and CHANNEL_B not in in_a  # nothing of B's
    assert "B-only failure text" not in in_a  # nor why B's runs failed
    in_b = await ask_in_dm("U0BOB", DM_B, TEAM_B)
    assert "## Totals" in in_b and "U0BOB" in in_b and "B-only failure text" in in_b
    assert CHANNEL_A not in in_b and "U0DEV" not in in_b
    # A's viewer in B's DM: B's entry names U0BOB alone
    refused = await ask_in_dm("U0DEV", DM_B, TEAM_B)
    assert "not allowed to see audit reports" in refused and "## Totals" not in refused


# one bot token (team T0FAKE): its entry names U0BOB; the default, U0DEV
SINGLE_POLICY = f"""\
default:
  audit_viewers: [U0DEV]
workspaces:
  - platform: slack
    workspace: {TEAM_ID}
    audit_viewers: [U0BOB]
"""
FROM_FEISHU = "called-from-feishu"


@pytest.fixture
async def single(
    aiohttp_client: Any, database_url: str, tmp_path: Path, fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
) -> SlackBot:  # fmt: skip
    """One bot token, the team's own viewers, and a call of another platform's tenant."""
    (tmp_path / "manifests").mkdir()
    policy = tmp_path / "workspaces.yaml"
    policy.write_text(SINGLE_POLICY)
    settings = bot_settings(
        database_url=database_url, manifests=tmp_path / "manifests", slack=fake_slack,
        llm_url=fake_openai.base_url, chatops_workspaces_file=policy,
        chatops_audit_viewers="U0DEV,U0BOB",
    )  # fmt: skip
    bot = SlackBot(await aiohttp_client(create_app(settings)), fake_slack)
    engine = open_database(database_url)
    with Session(engine) as session:
        session.add(
            CallLog(
                at=utcnow() - timedelta(minutes=10),
                platform="feishu",
                workspace="tenant_x",
                channel="oc_group",
                requester="ou_dev",
                requesters=["ou_dev"],
                connector="ops",
                action="restart",
                tool_name="ops__restart",
                mutating=True,
                arguments={"name": FROM_FEISHU},
                result_status="ok",
            )  # fmt: skip
        )
        session.commit()
    engine.dispose()
    return bot


async def test_single_token_audit_command_asks_the_teams_viewers_as_the_agent_does(
    single: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI
) -> None:
    async def command(user: str) -> str:
        fake_slack.ephemeral.clear()
        assert await single.send(slash_command("1h", user=user, channel="D0DM")) == 200
        await single.wait_idle()
        shown = await fake_slack.wait_for(lambda: list(fake_slack.ephemeral), 10)
        return json.dumps(shown)

    by_team_viewer = await command("U0BOB")  # the team's entry names U0BOB
    assert "not allowed" not in by_team_viewer and "Audit" in by_team_viewer
    # one token: the report still covers every workspace's calls (here a Feishu tenant's)
    assert FROM_FEISHU in by_team_viewer
    by_default_viewer = await command("U0DEV")  # the default's, not the team's
    assert "not allowed to see audit reports" in by_default_viewer

    fake_openai.respond_with(status_or_report)
    for user, allowed in (("U0BOB", True), ("U0DEV", False)):
        before = len(fake_openai.requests)
        await single.send(mention("report of the week please", user=user, channel=CHANNEL))
        await single.wait_idle()
        seen = tool_results(fake_openai, before)
        assert ("not allowed to see audit reports" not in seen) is allowed, (user, seen)
