"""Per-workspace approvers, approver groups and audit viewers (`CHATOPS_WORKSPACES_FILE`,
issue 35 item 3), through the real entry points: two Slack workspaces installed over OAuth,
mentions, clicks and `/chatops-audit` signed for real on `/slack/events`. The ops manifest names
no approvers (anyone may decide), so every refusal here comes from the workspaces file. Every
test runs on SQLite and PostgreSQL; the file's checks at start-up are in the last tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bot.cli import main
from bot.errors import ConfigError
from bot.server import create_app
from bot.surfaces.slack.cards import APPROVE_ACTION
from bot.workspaces import load_workspaces
from tests.fakes.openai_server import FakeOpenAI, answer, tool_call
from tests.fakes.ops_api import OpsAPI, ops_manifest
from tests.fakes.slack_api import FakeSlack
from tests.server.test_serve import free_port
from tests.slack.e2e import SlackBot, has_buttons
from tests.slack.payloads import block_actions, mention, slash_command
from tests.slack.test_workspaces import card_in_channel, restart_in_a_status_in_b
from tests.slack.workspaces import (
    CHANNEL_A,
    CHANNEL_B,
    TEAM_A,
    TEAM_B,
    click_from,
    from_team,
    install,
    oauth_settings,
    slash_from,
    two_workspaces,
)

# A is not listed: the default applies there. B names a group of its own.
POLICY = f"""\
default:
  approvers: [U0LEAD]
  audit_viewers: [U0DEV]
workspaces:
  - platform: slack
    workspace: {TEAM_B}
    approvers: [oncall]
    approver_groups:
      oncall: [U0BEN]
    audit_viewers: [U0BOB]
"""


async def start_bot(
    aiohttp_client: Any, database_url: str, tmp_path: Path, ops_api: OpsAPI,
    fake_slack: FakeSlack, fake_openai: FakeOpenAI, policy: str,
) -> SlackBot:  # fmt: skip
    two_workspaces(fake_slack)
    path = tmp_path / "workspaces.yaml"
    path.write_text(policy)
    settings = oauth_settings(
        database_url=database_url, directory=tmp_path, ops_url=ops_api.url, slack=fake_slack,
        llm_url=fake_openai.base_url, chatops_workspaces_file=path,
        # process-wide: everyone here; the file narrows it per workspace
        chatops_audit_viewers="U0DEV,U0BOB", chatops_approver_groups={"oncall": ["U0LEAD"]},
    )  # fmt: skip
    bot = SlackBot(await aiohttp_client(create_app(settings)), fake_slack)
    await install(bot, fake_slack, TEAM_A)
    await install(bot, fake_slack, TEAM_B)
    return bot


async def click(bot: SlackBot, card: dict[str, Any], user: str, channel: str, team: str) -> None:
    body = click_from(block_actions(card, APPROVE_ACTION, user=user, channel=channel), team)
    assert await bot.send(body) == 200  # handled by then (the inbound queue is idle)


@pytest.mark.both_databases
async def test_each_workspace_is_decided_by_its_own_approvers_only(
    aiohttp_client, database_url, tmp_path, ops_api, fake_slack, fake_openai
):
    bot = await start_bot(aiohttp_client, database_url, tmp_path, ops_api, fake_slack,
                          fake_openai, POLICY)  # fmt: skip
    fake_openai.respond_with(restart_in_a_status_in_b)
    roots = {}
    for team, channel in ((TEAM_A, CHANNEL_A), (TEAM_B, CHANNEL_B)):
        event = from_team(mention("restart api", channel=channel), team)
        roots[channel] = event["event"]["ts"]
        assert await bot.send(event) == 200
    card_a = await fake_slack.wait_for(lambda: card_in_channel(fake_slack, CHANNEL_A,
                                                               roots[CHANNEL_A]), 15)  # fmt: skip
    card_b = await fake_slack.wait_for(lambda: card_in_channel(fake_slack, CHANNEL_B,
                                                               roots[CHANNEL_B]), 15)  # fmt: skip

    # A's approver (the default entry's) clicks B's card from B; B's group member clicks A's
    # card from A (U0BEN is no one there: A's default names U0LEAD alone); the requester and
    # the process-wide `oncall` member U0LEAD as `oncall` in B: all decide nothing
    await click(bot, card_b, "U0LEAD", CHANNEL_B, TEAM_B)
    await click(bot, card_a, "U0BEN", CHANNEL_A, TEAM_A)
    await click(bot, card_a, "U0DEV", CHANNEL_A, TEAM_A)
    assert ops_api.restarts == []
    assert has_buttons(card_in_channel(fake_slack, CHANNEL_A, roots[CHANNEL_A]) or {})
    assert has_buttons(card_in_channel(fake_slack, CHANNEL_B, roots[CHANNEL_B]) or {})
    told = json.dumps(list(fake_slack.ephemeral))
    assert "not one of this workspace's approvers" in told

    # B's group decides B's call; the default's approver decides A's
    await click(bot, card_b, "U0BEN", CHANNEL_B, TEAM_B)
    await fake_slack.wait_for(lambda: ops_api.restarts == ["api"] or None, 15)
    assert not has_buttons(card_in_channel(fake_slack, CHANNEL_B, roots[CHANNEL_B]) or {})
    assert has_buttons(card_in_channel(fake_slack, CHANNEL_A, roots[CHANNEL_A]) or {})
    await click(bot, card_a, "U0LEAD", CHANNEL_A, TEAM_A)
    await bot.wait_idle()
    assert ops_api.restarts == ["api", "api"]


@pytest.mark.both_databases
async def test_an_audit_viewer_of_one_workspace_is_refused_in_another(
    aiohttp_client, database_url, tmp_path, ops_api, fake_slack, fake_openai
):
    bot = await start_bot(aiohttp_client, database_url, tmp_path, ops_api, fake_slack,
                          fake_openai, POLICY)  # fmt: skip

    async def audit(user: str, channel: str, team: str) -> str:
        fake_slack.ephemeral.clear()
        before = len(fake_slack.calls())
        command = slash_from(slash_command("7d", user=user, channel=channel), team)
        assert await bot.send(command) == 200
        await bot.wait_idle()
        answers = [c for c in fake_slack.calls()[before:] if c.method == "chat.postEphemeral"]
        assert answers and {fake_slack.team_of(c) for c in answers} == {team}
        return json.dumps([c.args for c in answers])

    in_a = await audit("U0DEV", CHANNEL_A, TEAM_A)
    assert "Audit" in in_a and "not allowed" not in in_a
    in_b = await audit("U0DEV", CHANNEL_B, TEAM_B)  # listed process-wide, not in B's entry
    assert "not allowed to see audit reports" in in_b
    by_b = await audit("U0BOB", CHANNEL_B, TEAM_B)
    assert "Audit" in by_b and "not allowed" not in by_b
    by_b_in_a = await audit("U0BOB", CHANNEL_A, TEAM_A)
    assert "not allowed to see audit reports" in by_b_in_a


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (("approvers: [oncall]", "approvers: oncall"), r":7: workspaces.0.approvers: Input should"),
        (("oncall: [U0BEN]", "oncall: U0BEN"), r":9: workspaces.0.approver_groups.oncall: "),
        (("approver_groups:", "approver_group:"), r":8: workspaces.0.approver_group: unknown"),
        (("audit_viewers: [U0BOB]", "audit_viewers: ['']"), r":10: workspaces.0.audit_viewers.0"),
        (("approvers: [U0LEAD]", "approvers: {a: b}"), r":2: default.approvers: Input should"),
    ],
)
def test_a_badly_shaped_people_list_names_its_line_and_field(tmp_path, change, expected):
    path = tmp_path / "workspaces.yaml"
    path.write_text(POLICY.replace(*change))
    with pytest.raises(ConfigError, match=expected):
        load_workspaces(path, None)


def test_unknown_user_ids_are_fine_and_a_bad_file_stops_serve_with_exit_2(
    tmp_path, monkeypatch, capsys
):
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    (manifests / "ops.yaml").write_text(ops_manifest("http://127.0.0.1:9"))
    good = tmp_path / "good.yaml"
    good.write_text(POLICY.replace("U0BEN", "U0NOBODY-EVER-SEEN"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CHATOPS_MANIFESTS_DIR", str(manifests))
    assert main(["workspaces", "validate", str(good)]) == 0
    bad = tmp_path / "bad.yaml"
    bad.write_text(POLICY.replace("approvers: [oncall]", "approvers: oncall"))
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'bot.db'}")
    monkeypatch.setenv("CHATOPS_WORKSPACES_FILE", str(bad))
    assert main(["serve", "--host", "127.0.0.1", "--port", str(free_port())]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:7: workspaces.0.approvers" in err and "Traceback" not in err


@pytest.mark.both_databases
async def test_the_agents_audit_report_follows_the_workspaces_viewers(
    aiohttp_client, database_url, tmp_path, ops_api, fake_slack, fake_openai
):
    """`audit__report` asked of the agent: the run's workspace's viewers, as on the command."""
    bot = await start_bot(aiohttp_client, database_url, tmp_path, ops_api, fake_slack,
                          fake_openai, POLICY)  # fmt: skip

    def report_then_done(body: dict[str, Any]) -> Any:
        if body.get("stream") or any(m["role"] == "tool" for m in body["messages"]):
            return answer("done")
        return tool_call("audit__report", {"since": "7d"}, id="call_audit")

    fake_openai.respond_with(report_then_done)

    async def tool_result(channel: str, team: str) -> str:
        before = len(fake_openai.requests)
        assert await bot.send(from_team(mention("audit please", channel=channel), team)) == 200
        await bot.wait_idle()
        results = [m["content"] for r in fake_openai.requests[before:] for m in r["messages"]
                   if m["role"] == "tool"]  # fmt: skip
        assert results
        return json.dumps(results)

    in_a = await tool_result(CHANNEL_A, TEAM_A)  # U0DEV: the default entry's viewer
    assert "## Totals" in in_a and "not allowed to see audit reports" not in in_a
    in_b = await tool_result(CHANNEL_B, TEAM_B)  # B lists U0BOB alone
    assert "not allowed to see audit reports" in in_b and "## Totals" not in in_b
