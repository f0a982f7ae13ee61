"""Manifest `rules` in CEL decide each call's policy, through the real entry points: a signed
Slack mention and clicks, a Feishu event and card callback, the console's HTTP routes. The call
log and the audit report name the rule that decided."""

from __future__ import annotations

import json

import pytest

from bot.cli import main
from bot.storage.models import Approval, CallLog
from bot.surfaces.slack.cards import APPROVE_ACTION
from tests.approvals.conftest import DENY_RULE, PRODUCTION_RULE, STAGING_RULE, write_manifest
from tests.fakes.openai_server import FakeOpenAI, tool_call
from tests.fakes.ops_api import OpsAPI
from tests.fakes.slack_api import FakeSlack
from tests.feishu.e2e import FeishuBot
from tests.feishu.e2e import wait_card as wait_feishu_card
from tests.security.conftest import approval_cards, ephemeral_to, finishing, wait_cards
from tests.security.test_console import console_settings
from tests.server.conftest import ConsoleClient
from tests.slack.e2e import SlackBot
from tests.slack.payloads import mention


def restart(name: str, env: str) -> list:
    return finishing(tool_call("ops__restart", {"name": name, "env": env}))


def tool_texts(fake: FakeOpenAI) -> list[str]:
    return [
        str(m.get("content"))
        for body in fake.requests
        for m in body.get("messages", [])
        if m.get("role") == "tool"
    ]


async def test_slack_a_rule_picks_the_policy_by_argument(
    slack_bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, ops_api: OpsAPI, db_rows
) -> None:
    """Staging runs unasked; production needs both leads (the card says which rule and why),
    and the static approver alone is not enough."""
    fake_openai.script(*restart("api", "staging"), *restart("api", "production"))
    await slack_bot.send(mention("restart api on staging", user="U0DEV"))
    await slack_bot.wait_idle()
    assert ops_api.restarts == ["api"]
    [free] = db_rows(CallLog)
    assert (free.approval_status, free.policy_rule) == ("not_required", STAGING_RULE)

    event = mention("restart api on production", user="U0DEV")
    root = event["event"]["ts"]
    await slack_bot.send(event)
    [card] = await wait_cards(fake_slack, root, 1)
    shown = json.dumps(card["blocks"])
    assert f"Policy: rule '{PRODUCTION_RULE}': production needs two leads" in shown
    assert ":red_circle:" in shown or "high" in shown
    await slack_bot.click(card, APPROVE_ACTION, user="U0DEV")  # not a lead
    assert any("not one of the approvers" in t for t in ephemeral_to(fake_slack, "U0DEV"))
    await slack_bot.click(card, APPROVE_ACTION, user="U0LEAD")
    assert ops_api.restarts == ["api"]  # one of two
    await slack_bot.click(card, APPROVE_ACTION, user="U0LEAD2")
    await slack_bot.wait_idle()
    assert ops_api.restarts == ["api", "api"]
    [approval] = db_rows(Approval)
    assert approval.policy_rule == PRODUCTION_RULE and approval.min_approvals == 2
    assert sorted(approval.decided_by) == ["U0LEAD", "U0LEAD2"]
    logged = db_rows(CallLog, policy_rule=PRODUCTION_RULE)
    assert [(c.approval_status, c.result_status) for c in logged] == [("approved", "ok")]


async def test_slack_deny_blocks_without_asking_and_the_audit_names_the_rule(
    slack_bot: SlackBot,
    fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
    ops_api: OpsAPI,
    db_rows,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    fake_openai.script(*restart("payments-db-1", "production"))
    event = mention("restart payments-db-1", user="U0DEV")
    await slack_bot.send(event)
    await slack_bot.wait_idle()
    assert ops_api.calls == []
    assert approval_cards(fake_slack, event["event"]["ts"]) == []  # nobody was asked
    assert db_rows(Approval) == []
    [row] = db_rows(CallLog)
    assert (row.approval_status, row.result_status) == ("denied", "blocked")
    assert row.policy_rule == DENY_RULE
    assert "change board" in (row.error or "")
    assert any("DENIED" in t and "change board" in t for t in tool_texts(fake_openai))

    monkeypatch.setenv("DATABASE_URL", database_url)
    assert main(["audit", "--since", "1h"]) == 0
    report = capsys.readouterr().out
    section = report[report.index("### Approvals by rule") :]
    assert f"| ops | restart | {DENY_RULE} | 1 | 0 | 0 | 0 | 0 | 1 |" in section


async def test_feishu_production_needs_both_leads_and_staging_runs_unasked(
    feishu_bot: FeishuBot, fake_openai: FakeOpenAI, ops_api: OpsAPI, db_rows
) -> None:
    fake_openai.script(*restart("api", "staging"), *restart("web", "production"))
    await feishu_bot.send(feishu_bot.fake.message_event("restart api on staging", user="ou_dev"))
    await feishu_bot.wait_idle()
    assert ops_api.restarts == ["api"]

    event = feishu_bot.fake.message_event("restart web on production", user="ou_dev")
    root = event["event"]["message"]["message_id"]
    await feishu_bot.send(event)
    card = await wait_feishu_card(feishu_bot.fake, root, pending=True)
    assert f"Policy: rule '{PRODUCTION_RULE}'" in json.dumps(card.content, ensure_ascii=False)
    await feishu_bot.click(card, "approve", user="ou_lead")
    assert ops_api.restarts == ["api"]
    await feishu_bot.click(card, "approve", user="ou_lead2")
    await feishu_bot.wait_idle()
    assert ops_api.restarts == ["api", "web"]
    rules = sorted((c.policy_rule, c.approval_status) for c in db_rows(CallLog))
    assert rules == [(STAGING_RULE, "not_required"), (PRODUCTION_RULE, "approved")]


async def test_console_deny_and_free_staging(
    tmp_path, database_url, ops_api: OpsAPI, fake_openai: FakeOpenAI, aiohttp_client, db_rows
) -> None:
    from bot.server import create_app

    manifests = write_manifest(tmp_path, ops_api.url, lead="alice")
    client = await aiohttp_client(
        create_app(console_settings(database_url, manifests, fake_openai))
    )
    fake_openai.script(*restart("payments-db", "staging"), *restart("api", "staging"))
    console = ConsoleClient(client)
    await console.start()
    try:
        assert (await console.send("restart payments-db", user="alice")).status == 202
        await console.wait_item(lambda i: i["kind"] == "answer")
        assert (await console.send("restart api", user="alice")).status == 202
        await ops_api.wait_for(lambda: ops_api.restarts == ["api"])
    finally:
        await console.close()
    assert not any(i["kind"] == "approval" for i in console.items.values())
    assert sorted((c.policy_rule, c.approval_status) for c in db_rows(CallLog)) == [
        (DENY_RULE, "denied"),
        (STAGING_RULE, "not_required"),
    ]


async def test_slack_a_timeout_the_rule_makes_a_rejection_never_approves(
    slack_bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, ops_api: OpsAPI, db_rows
) -> None:
    """`on_timeout: reject`: nobody answered, so the call is rejected (not expired, and never
    run), and the card says so."""
    fake_openai.script(*restart("api", "qa"))
    event = mention("restart api on qa", user="U0DEV")
    root = event["event"]["ts"]
    await slack_bot.send(event)
    await wait_cards(fake_slack, root, 1)
    await slack_bot.wait_idle()
    [approval] = db_rows(Approval)
    assert (approval.status, approval.decided_by, approval.on_timeout) == ("rejected", [], "reject")
    assert ops_api.calls == []
    [row] = db_rows(CallLog)
    assert (row.approval_status, row.result_status) == ("rejected", "rejected")
    assert row.policy_rule == "qa waits briefly"
    assert any("TIMED OUT" in t and "as a rejection" in t for t in tool_texts(fake_openai))
    [ended] = approval_cards(fake_slack, root)
    assert "actions" not in [b["type"] for b in ended["blocks"]]  # no button left to press
    assert "Rejected" in json.dumps(ended["blocks"]) or "rejected" in ended["text"]
