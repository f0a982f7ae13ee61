"""Edit, then approve, and request changes, on Slack: the real app (`create_app`), signed clicks
and signed `view_submission`s to `/slack/events`, the modal checked against slack_sdk's view
models by FakeSlack, on SQLite and PostgreSQL.

The manifest is the rules one (tests/approvals/conftest.py): `restart` needs U0LEAD; production
needs two leads (never the requester); `payments-db*` is denied by a connector-wide rule.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from bot.storage.models import Approval, ApprovalDecision, CallLog
from bot.surfaces.slack.cards import (
    APPROVE_ACTION,
    CARD_DETAILS_ACTION,
    CHANGES_ACTION,
    EDIT_ACTION,
)
from bot.surfaces.slack.edit_modal import EDIT_MODAL
from bot.surfaces.slack.inbound import SLACK_INBOUND_KEY
from tests.approvals.conftest import DENY_RULE, PRODUCTION_RULE
from tests.approvals.test_rules import restart, tool_texts
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.ops_api import OpsAPI
from tests.fakes.slack_api import FakeSlack, valid_view
from tests.security.conftest import approval_cards, wait_cards
from tests.slack.e2e import SlackBot
from tests.slack.payloads import as_body, block_actions, mention, signed_headers, submitted

pytestmark = pytest.mark.both_databases


def edited(view: dict[str, Any], **texts: str | None) -> dict[str, Any]:
    """The state Slack sends for the edit modal `view`: each input as it was opened, with
    `texts` typed over the named arguments (None: emptied)."""
    values: dict[str, Any] = {}
    for block in view["blocks"]:
        if block["type"] != "input":
            continue
        name = block["block_id"].removeprefix("arg:")
        element = block["element"]
        text = texts[name] if name in texts else element.get("initial_value")
        values[block["block_id"]] = {"value": {"type": element["type"], "value": text}}
    return values


async def submit(bot: SlackBot, view: dict[str, Any], values: dict, *, user: str) -> Any:
    """POST the signed submission; returns bolt's JSON answer (None: an empty ack)."""
    body = as_body(submitted(view, values, user=user))
    response = await bot.client.post("/slack/events", data=body, headers=signed_headers(body))
    assert response.status == 200
    text = await response.text()
    await bot.app[SLACK_INBOUND_KEY].wait_idle(10)  # a stored decision was applied
    return json.loads(text) if text else None


async def open_edit(bot: SlackBot, fake: FakeSlack, card: dict, *, user: str) -> dict[str, Any]:
    before = len(fake.calls("views.open"))
    await bot.click(card, EDIT_ACTION, user=user)
    opened = await fake.wait_for(lambda: fake.calls("views.open")[before:], 10)
    view = opened[0].args["view"]
    assert view["callback_id"] == EDIT_MODAL and valid_view(view)
    return view


async def ask(bot: SlackBot, fake: FakeSlack, text: str) -> tuple[str, dict[str, Any]]:
    event = mention(text, user="U0DEV")
    root = event["event"]["ts"]
    await bot.send(event)
    [card] = await wait_cards(fake, root, 1)
    return root, card


async def test_an_edited_call_is_exactly_what_runs_and_the_model_is_told(
    slack_bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, ops_api: OpsAPI, db_rows
) -> None:
    fake_openai.script(*restart("api", "dev"))
    root, card = await ask(slack_bot, fake_slack, "restart api on dev")
    view = await open_edit(slack_bot, fake_slack, card, user="U0LEAD")
    inputs = {b["block_id"]: b["element"] for b in view["blocks"] if b["type"] == "input"}
    assert inputs["arg:name"]["initial_value"] == "api" and inputs["arg:env"]["initial_value"]

    assert await submit(slack_bot, view, edited(view, name="web"), user="U0LEAD") is None
    await slack_bot.wait_idle()
    assert ops_api.restarts == ["web"]  # the edit ran, never the model's call
    [approval] = db_rows(Approval)
    assert (approval.status, approval.edited_by) == ("approved", "U0LEAD")
    assert approval.arguments == {"name": "web", "env": "dev"}
    assert approval.model_arguments == {"name": "api", "env": "dev"}
    assert approval.fingerprint != approval.model_fingerprint
    [row] = db_rows(CallLog)
    assert (row.arguments, row.model_arguments) == (approval.arguments, approval.model_arguments)
    assert (row.edited_by, row.approval_status, row.result_status) == ("U0LEAD", "approved", "ok")
    [told] = tool_texts(fake_openai)
    assert "EDITED" in told and '~ name: "api" -> "web"' in told and "restarted" in told
    [decided] = approval_cards(fake_slack, root)  # folded: the details open in a modal
    assert "Approved by <@U0LEAD>" in json.dumps(decided["blocks"])
    opened = len(fake_slack.calls("views.open"))
    await slack_bot.send(block_actions(decided, CARD_DETAILS_ACTION, user="U0LEAD"))
    details = await fake_slack.wait_for(lambda: fake_slack.calls("views.open")[opened:], 10)
    shown = json.dumps(details[0].args["view"]["blocks"])
    assert "Edited by U0LEAD" in shown and '\\"name\\": \\"web\\"' in shown


async def test_a_bad_edit_is_refused_inside_the_modal_and_nothing_is_decided(
    slack_bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, ops_api: OpsAPI, db_rows
) -> None:
    fake_openai.script(*restart("api", "dev"))
    _root, card = await ask(slack_bot, fake_slack, "restart api on dev")
    view = await open_edit(slack_bot, fake_slack, card, user="U0LEAD")

    reply = await submit(slack_bot, view, edited(view, name=None), user="U0LEAD")
    assert reply == {"response_action": "errors", "errors": {"arg:name": "required"}}
    denied = await submit(slack_bot, view, edited(view, name="payments-db-1"), user="U0LEAD")
    assert denied["response_action"] == "errors"
    assert f"denied by the rule {DENY_RULE!r}" in denied["errors"]["arg:name"]
    assert "change board" in denied["errors"]["arg:name"]
    more = await submit(slack_bot, view, edited(view, env="production"), user="U0LEAD")
    assert f"falls under the rule {PRODUCTION_RULE!r}" in more["errors"]["arg:name"]
    assert "needs 2 approvals" in more["errors"]["arg:name"]
    not_mine = await submit(slack_bot, view, edited(view, name="web"), user="U0DEV")
    assert "not one of the approvers" in not_mine["errors"]["arg:name"]

    [approval] = db_rows(Approval)
    assert (approval.status, approval.arguments, approval.edited_by) == (
        "pending", {"name": "api", "env": "dev"}, "",
    )  # fmt: skip
    assert ops_api.calls == [] and db_rows(ApprovalDecision) == []
    await slack_bot.click(card, APPROVE_ACTION, user="U0LEAD")  # still decidable as it was
    await slack_bot.wait_idle()
    assert ops_api.restarts == ["api"]


async def test_under_a_quorum_an_edit_resets_the_tally(
    slack_bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, ops_api: OpsAPI, db_rows
) -> None:
    """Two leads must approve production: the second lead's approval of the model's call does
    not count for the edited one; both approve the edited call and it is what runs."""
    fake_openai.script(*restart("api", "production"))
    root, card = await ask(slack_bot, fake_slack, "restart api on production")
    await slack_bot.click(card, APPROVE_ACTION, user="U0LEAD2")  # 1 of 2, the model's call
    view = await open_edit(slack_bot, fake_slack, card, user="U0LEAD")
    assert await submit(slack_bot, view, edited(view, name="web"), user="U0LEAD") is None
    [approval] = db_rows(Approval)
    assert approval.status == "pending" and approval.arguments["name"] == "web"
    pending = await fake_slack.wait_for(
        lambda: next((c for c in approval_cards(fake_slack, root)
                      if "Edited by U0LEAD" in json.dumps(c["blocks"])), None), 10,
    )  # fmt: skip
    assert "1 of 2 approvals" in json.dumps(pending["blocks"])  # only the editor's counts
    assert ops_api.calls == []

    await slack_bot.click(pending, APPROVE_ACTION, user="U0LEAD2")  # approves the edited call
    await slack_bot.wait_idle()
    assert ops_api.restarts == ["web"]
    [approval] = db_rows(Approval)
    assert approval.status == "approved" and sorted(approval.decided_by) == ["U0LEAD", "U0LEAD2"]
    assert {(d.user_id, d.fingerprint) for d in db_rows(ApprovalDecision)} == {
        ("U0LEAD", approval.fingerprint), ("U0LEAD2", approval.fingerprint),
    }  # fmt: skip


async def test_request_changes_reaches_the_model_as_guidance_and_nothing_runs(
    slack_bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, ops_api: OpsAPI, db_rows
) -> None:
    fake_openai.script(*restart("api", "dev"))
    root, card = await ask(slack_bot, fake_slack, "restart api on dev")
    await slack_bot.click(card, CHANGES_ACTION, user="U0LEAD")
    [opened] = await fake_slack.wait_for(lambda: fake_slack.calls("views.open"), 10)
    view = opened.args["view"]
    assert view["callback_id"] == "chatops_changes_modal" and valid_view(view)
    text = {"type": "plain_text_input", "value": "drain api first, then restart web"}
    assert await submit(slack_bot, view, {"reason": {"reason_input": text}}, user="U0LEAD") is None
    await slack_bot.wait_idle()

    assert ops_api.calls == []
    [approval] = db_rows(Approval)
    assert approval.status == "changes_requested" and approval.decided_by == ["U0LEAD"]
    [row] = db_rows(CallLog)
    assert (row.approval_status, row.result_status) == ("changes_requested", "blocked")
    [told] = tool_texts(fake_openai)
    assert "drain api first, then restart web" in told and "asked for changes" in told
    assert "Do not retry" not in told and "propose a different call" in told
    [decided] = approval_cards(fake_slack, root)
    shown = json.dumps(decided["blocks"])
    assert "Changes requested" in shown and "Guidance for the agent" in shown
