"""Edit, then approve, and request changes, on Feishu: the real app, encrypted and signed card
callbacks to `/feishu/events`; the edit form is a card JSON 2.0 `form` shown in place of the
approval card, a refused edit comes back in it with the problem; SQLite and PostgreSQL."""

from __future__ import annotations

import json

import pytest

from bot.storage.models import Approval, CallLog
from tests.approvals.conftest import DENY_RULE
from tests.approvals.test_rules import restart, tool_texts
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.ops_api import OpsAPI
from tests.feishu.e2e import FeishuBot
from tests.feishu.e2e import wait_card as wait_feishu_card

pytestmark = pytest.mark.both_databases


async def ask(bot: FeishuBot, text: str):
    event = bot.fake.message_event(text, user="ou_dev")
    root = event["event"]["message"]["message_id"]
    await bot.send(event)
    return root, await wait_feishu_card(bot.fake, root, pending=True)


def inputs(card: dict) -> dict[str, dict]:
    [form] = [e for e in card["body"]["elements"] if e.get("tag") == "form"]
    return {e["name"]: e for e in form["elements"] if e.get("tag") in ("input", "select_static")}


async def test_feishu_edit_then_approve_in_the_form_card(
    feishu_bot: FeishuBot, fake_openai: FakeOpenAI, ops_api: OpsAPI, db_rows
) -> None:
    fake_openai.script(*restart("api", "dev"))
    root, card = await ask(feishu_bot, "restart api on dev")
    _status, opened = await feishu_bot.click(card, "edit", user="ou_lead")
    form = opened["card"]["data"]
    assert form["schema"] == "2.0" and inputs(form)["arg_0"]["default_value"] == "api"
    assert inputs(form)["arg_1"]["default_value"] == "dev"

    fake = feishu_bot.fake
    denied_values = {"arg_0": "payments-db-1", "arg_1": "dev"}
    _status, denied = await feishu_bot.send(
        fake.form_action(card.message_id, form, "approve_edited", user="ou_lead",
                         form_value=denied_values)
    )  # fmt: skip
    assert (
        denied["toast"]["type"] == "error" and f"rule {DENY_RULE!r}" in denied["toast"]["content"]
    )
    again = denied["card"]["data"]
    assert "change board" in json.dumps(again) and inputs(again)["arg_0"]["default_value"] == (
        "payments-db-1"
    )  # the form again, as typed, with the problem
    [approval] = db_rows(Approval)
    assert approval.status == "pending" and ops_api.calls == []

    _status, done = await feishu_bot.send(
        fake.form_action(card.message_id, again, "approve_edited", user="ou_lead",
                         form_value={"arg_0": "web", "arg_1": "dev"})
    )  # fmt: skip
    assert done["toast"]["type"] == "success", done
    await feishu_bot.wait_idle()
    assert ops_api.restarts == ["web"]
    [approval] = db_rows(Approval)
    assert (approval.status, approval.edited_by) == ("approved", "ou_lead")
    [row] = db_rows(CallLog)
    assert row.model_arguments == {"name": "api", "env": "dev"}
    assert row.arguments == {"name": "web", "env": "dev"} and row.edited_by == "ou_lead"
    assert any("EDITED" in t for t in tool_texts(fake_openai))
    assert "Edited by ou_lead" in json.dumps(
        (await wait_feishu_card(fake, root, pending=False)).content
    )


async def test_feishu_back_decides_nothing_and_request_changes_guides_the_model(
    feishu_bot: FeishuBot, fake_openai: FakeOpenAI, ops_api: OpsAPI, db_rows
) -> None:
    fake_openai.script(*restart("api", "dev"))
    root, card = await ask(feishu_bot, "restart api on dev")
    _status, opened = await feishu_bot.click(card, "edit", user="ou_lead")
    _status, back = await feishu_bot.send(
        feishu_bot.fake.form_action(card.message_id, opened["card"]["data"], "back",
                                    user="ou_lead", form_value={})
    )  # fmt: skip
    assert '"tag": "form"' in json.dumps(back["card"]["data"])  # the approval card again
    assert db_rows(Approval)[0].status == "pending"

    _status, empty = await feishu_bot.click(card, "request_changes", user="ou_lead")
    assert empty["toast"]["type"] == "error" and db_rows(Approval)[0].status == "pending"
    await feishu_bot.click(card, "request_changes", user="ou_lead", reason="restart web instead")
    await feishu_bot.wait_idle()
    assert ops_api.calls == []
    [approval] = db_rows(Approval)
    assert approval.status == "changes_requested"
    assert any("restart web instead" in t and "asked for changes" in t
               for t in tool_texts(fake_openai))  # fmt: skip
    decided = (await wait_feishu_card(feishu_bot.fake, root, pending=False)).content
    assert "Changes requested" in json.dumps(decided)
