"""Approve or reject with a comment on every surface, through the real entry points: Slack's
"Approve with comment" button opens a modal (validated by the fake as Slack validates views)
whose submission approves; Feishu's form carries the comment with the Approve button; the
console's API takes it with the decision. The comment is on the decided card, in the call log
(`approval_comment`) and in the audit report (Markdown and JSON). On SQLite and PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine

from bot.audit.render import markdown
from bot.audit.report import AuditQuery, build_report
from bot.server import create_app
from bot.storage.models import Approval, ApprovalDecision, CallLog
from bot.surfaces.slack.cards import APPROVE_COMMENT_ACTION, APPROVE_MODAL, REJECT_ACTION
from tests.approvals.conftest import write_manifest
from tests.approvals.test_rules import restart
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.ops_api import OpsAPI
from tests.fakes.slack_api import FakeSlack
from tests.feishu.e2e import FeishuBot, approval_message, plain_text_of
from tests.feishu.e2e import wait_card as wait_feishu_card
from tests.security.conftest import is_pending, wait_cards
from tests.security.test_console import console_settings
from tests.server.conftest import ConsoleClient
from tests.slack.e2e import SlackBot
from tests.slack.payloads import mention, view_submission

pytestmark = pytest.mark.both_databases

COMMENT = "ok: the release is done, go ahead"


@pytest.fixture
async def console_bot(
    tmp_path: Path, database_url: str, ops_api: OpsAPI, fake_openai: FakeOpenAI,
    aiohttp_client: Any,
) -> AsyncIterator[ConsoleClient]:  # fmt: skip
    manifests = write_manifest(tmp_path, ops_api.url, lead="lead")
    client = await aiohttp_client(create_app(console_settings(database_url, manifests,
                                                              fake_openai)))  # fmt: skip
    console = ConsoleClient(client)
    await console.start()
    try:
        yield console
    finally:
        await console.close()


def report_of(database_url: str):
    engine = create_engine(database_url)
    try:
        return build_report(engine, AuditQuery.window("7d"))
    finally:
        engine.dispose()


def comment_everywhere(database_url: str, db_rows, comment: str, status: str) -> None:
    """The comment is in the call log, the decision's row and the audit report."""
    [logged] = db_rows(CallLog, tool_name="ops__restart")
    assert (logged.approval_status, logged.approval_comment) == (status, comment)
    assert [d.reason for d in db_rows(ApprovalDecision)] == [comment]
    report = report_of(database_url)
    [entry] = report.mutating_calls
    assert entry.approval_comment == comment
    assert f'"{comment}"' in markdown(report)
    assert json.loads(report.model_dump_json())["mutating_calls"][0]["approval_comment"] == comment


async def test_slack_approve_with_a_comment_through_the_modal(
    slack_bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, ops_api: OpsAPI,
    database_url: str, db_rows,
) -> None:  # fmt: skip
    fake_openai.script(*restart("api", "dev"))
    event = mention("restart api on dev", user="U0DEV")
    root = event["event"]["ts"]
    await slack_bot.send(event)
    [card] = await wait_cards(fake_slack, root, 1)
    await slack_bot.click(card, APPROVE_COMMENT_ACTION, user="U0EVIL")  # no dialog for them
    assert fake_slack.calls("views.open") == []
    await slack_bot.click(card, APPROVE_COMMENT_ACTION, user="U0LEAD")
    [opened] = fake_slack.calls("views.open")  # the fake checked it as Slack checks a view
    view = opened.args["view"]
    assert view["callback_id"] == APPROVE_MODAL and ops_api.calls == []
    assert await slack_bot.send(view_submission(view, user="U0LEAD", reason=COMMENT)) == 200
    await slack_bot.wait_idle()
    assert ops_api.restarts == ["api"]
    [decided] = await wait_cards(fake_slack, root, 1)
    shown = json.dumps(decided["blocks"])
    assert not is_pending(decided) and "Approved" in shown and COMMENT in shown
    [approval] = db_rows(Approval)
    assert (approval.status, approval.decision_reason) == ("approved", COMMENT)
    comment_everywhere(database_url, db_rows, COMMENT, "approved")


async def test_slack_reject_with_a_comment_is_kept_in_the_call_log_and_report(
    slack_bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, ops_api: OpsAPI,
    database_url: str, db_rows,
) -> None:  # fmt: skip
    fake_openai.script(*restart("api", "dev"))
    event = mention("restart api on dev", user="U0DEV")
    await slack_bot.send(event)
    [card] = await wait_cards(fake_slack, event["event"]["ts"], 1)
    await slack_bot.click(card, REJECT_ACTION, user="U0LEAD")
    [opened] = fake_slack.calls("views.open")
    await slack_bot.submit_reject(opened.args["view"], user="U0LEAD", reason="not now")
    await slack_bot.wait_idle()
    assert ops_api.calls == []
    comment_everywhere(database_url, db_rows, "not now", "rejected")


async def test_feishu_approve_with_a_comment_in_the_form(
    feishu_bot: FeishuBot, fake_openai: FakeOpenAI, ops_api: OpsAPI, database_url: str, db_rows
) -> None:
    fake = feishu_bot.fake
    fake_openai.script(*restart("api", "dev"))
    event = fake.message_event("restart api on dev", user="ou_dev")
    root = event["event"]["message"]["message_id"]
    await feishu_bot.send(event)
    card = await wait_feishu_card(fake, root, pending=True)
    await feishu_bot.click(card, "approve", user="ou_lead", reason=COMMENT)
    await feishu_bot.wait_idle()
    assert ops_api.restarts == ["api"]
    await fake.wait_for(lambda f: COMMENT in plain_text_of(approval_message(f, root).content))
    assert "Approved" in json.dumps(approval_message(fake, root).content)
    comment_everywhere(database_url, db_rows, COMMENT, "approved")


async def test_console_approve_with_a_comment(
    console_bot: ConsoleClient, fake_openai: FakeOpenAI, ops_api: OpsAPI, database_url: str,
    db_rows,
) -> None:  # fmt: skip
    fake_openai.script(*restart("api", "dev"))
    assert (await console_bot.send("restart api on dev", user="dev")).status == 202
    card = await console_bot.wait_item(lambda i: i["kind"] == "approval")
    approval_id = card["data"]["approval_id"]
    response = await console_bot.decide(approval_id, "approve", user="lead", reason=COMMENT)
    assert response.status == 200
    await ops_api.wait_for(lambda: ops_api.restarts == ["api"])
    decided = await console_bot.wait_item(
        lambda i: i["id"] == card["id"] and i["data"]["state"] == "approved"
    )
    assert decided["data"]["decision_reason"] == COMMENT
    await console_bot.wait_item(lambda i: i["kind"] == "answer")
    comment_everywhere(database_url, db_rows, COMMENT, "approved")
