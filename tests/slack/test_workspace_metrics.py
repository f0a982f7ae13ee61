"""`GET /metrics` names the workspace of each run and approval (issue 35 item 4), within a
bound: runs in two OAuth-installed workspaces through the real `/slack/events`, then a scrape
of the real app's `/metrics`. Every test runs on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from bot.observability.workspace_labels import ALL, OTHER, WorkspaceLabels
from bot.server import create_app
from bot.surfaces.slack.cards import APPROVE_ACTION
from tests.fakes.openai_server import FakeOpenAI, Turn, answer, tool_call
from tests.fakes.ops_api import OpsAPI
from tests.fakes.slack_api import FakeSlack
from tests.slack.e2e import SlackBot
from tests.slack.payloads import block_actions, mention
from tests.slack.test_workspaces import card_in_channel
from tests.slack.workspaces import (
    CHANNEL_A,
    CHANNEL_B,
    TEAM_A,
    TEAM_B,
    click_from,
    from_team,
    install,
    oauth_settings,
    two_workspaces,
)

pytestmark = pytest.mark.both_databases
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def restart_in_a(body: dict[str, Any]) -> Turn:
    """A's thread restarts `api` (an approval); B's is answered at once."""
    if body.get("stream") or any(m["role"] == "tool" for m in body["messages"]):
        return answer("done")
    if "restart" in str(body["messages"]):
        return tool_call("ops__restart", {"name": "api"}, id="call_restart")
    return answer("all quiet")


async def start_bot(
    aiohttp_client: Any, database_url: str, tmp_path: Any, ops_api: OpsAPI,
    fake_slack: FakeSlack, fake_openai: FakeOpenAI, **extra: Any,
) -> SlackBot:  # fmt: skip
    two_workspaces(fake_slack)
    settings = oauth_settings(
        database_url=database_url, directory=tmp_path, ops_url=ops_api.url, slack=fake_slack,
        llm_url=fake_openai.base_url, **extra,
    )  # fmt: skip
    fake_openai.respond_with(restart_in_a)
    bot = SlackBot(await aiohttp_client(create_app(settings)), fake_slack)
    await install(bot, fake_slack, TEAM_A)
    await install(bot, fake_slack, TEAM_B)
    return bot


async def scrape(bot: SlackBot) -> Samples:
    response = await bot.client.get("/metrics")
    assert response.status == 200
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(await response.text())
        for s in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


async def run_in_both(bot: SlackBot, ops_api: OpsAPI) -> None:
    """A: a restart approved by a click from A (after a forged one from B); B: one answer."""
    fake = bot.fake
    event = from_team(mention("restart api", channel=CHANNEL_A), TEAM_A)
    await bot.send(event)
    card = await fake.wait_for(lambda: card_in_channel(fake, CHANNEL_A, event["event"]["ts"]), 15)
    forged = click_from(
        block_actions(card, APPROVE_ACTION, user="U0EVE", channel=CHANNEL_A), TEAM_B
    )
    assert await bot.send(forged) == 200  # refused: it must count nowhere
    click = click_from(
        block_actions(card, APPROVE_ACTION, user="U0LEAD", channel=CHANNEL_A), TEAM_A
    )
    assert await bot.send(click) == 200
    assert await bot.send(from_team(mention("status?", channel=CHANNEL_B), TEAM_B)) == 200
    await bot.wait_idle()
    assert ops_api.restarts == ["api"]


async def test_runs_and_approvals_carry_their_workspace(
    aiohttp_client, database_url, tmp_path, ops_api, fake_slack, fake_openai
):
    bot = await start_bot(aiohttp_client, database_url, tmp_path, ops_api, fake_slack, fake_openai)
    await run_in_both(bot, ops_api)
    samples = await scrape(bot)
    started = "chatops_workspace_runs_started_total"
    ended = "chatops_workspace_runs_total"
    decided = "chatops_workspace_approvals_decided_total"
    for team in (TEAM_A, TEAM_B):
        assert value(samples, started, platform="slack", workspace=team) == 1
        assert value(samples, ended, platform="slack", workspace=team, outcome="done") == 1
    assert value(samples, decided, platform="slack", workspace=TEAM_A, decision="approved") == 1
    assert value(samples, decided, platform="slack", workspace=TEAM_B, decision="approved") is None
    # the unlabelled totals still add up
    assert value(samples, "chatops_runs_total", outcome="done") == 2


async def test_workspaces_past_the_bound_are_other_and_zero_names_none(
    aiohttp_client, database_url, tmp_path, ops_api, fake_slack, fake_openai
):
    bot = await start_bot(
        aiohttp_client, database_url, tmp_path, ops_api, fake_slack, fake_openai,
        chatops_metrics_workspaces=1,
    )  # fmt: skip
    await run_in_both(bot, ops_api)
    samples = await scrape(bot)
    started = "chatops_workspace_runs_started_total"
    assert value(samples, started, platform="slack", workspace=TEAM_A) == 1  # seen first
    assert value(samples, started, platform="slack", workspace=OTHER) == 1
    assert value(samples, started, platform="slack", workspace=TEAM_B) is None


def test_the_label_is_bounded_and_takes_no_odd_values():
    labels = WorkspaceLabels(limit=2)
    assert labels("slack", "T1") == "T1"
    assert labels("slack", 'T2"} 1\nfake_metric{') == OTHER  # an injected value is not a name
    assert labels("slack", "") == "none"  # the single-token mode's own workspace
    assert labels("slack", "T3") == OTHER  # past the bound
    assert labels("slack", "T1") == "T1"  # still named
    assert WorkspaceLabels(limit=0)("slack", "T1") == ALL
