"""Batches on Feishu: one card JSON 2.0 for the calls of one model response, each call with a
form of its own and Approve all / Reject all, driven by encrypted, signed card callbacks to
`/feishu/events` (the fake parses every card as Feishu does), on SQLite and PostgreSQL.

The manifest is the rules one (tests/approvals/conftest.py): a restart on dev asks ou_lead; on
production two leads (ou_lead, ou_lead2), never the requester (ou_dev).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from bot.statuses import ApprovalStatus
from bot.storage.models import Approval, ApprovalDecision, CallLog
from tests.approvals.test_batches_slack import restarts
from tests.approvals.test_rules import tool_texts
from tests.fakes.feishu_elements import elements_problem
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.ops_api import OpsAPI
from tests.feishu.e2e import FeishuBot, approval_message

pytestmark = pytest.mark.both_databases


def forms(card: dict[str, Any]) -> list[str]:
    """The names of a card's forms, in order."""
    return [e["name"] for e in card["body"]["elements"] if e.get("tag") == "form"]


async def ask_batch(bot: FeishuBot, openai: FakeOpenAI, *calls: tuple[str, str]) -> Any:
    """ou_dev asks; the batch card (its message) once it lists a form per call."""
    openai.script(*restarts(*calls))
    event = bot.fake.message_event("restart them", user="ou_dev")
    root = event["event"]["message"]["message_id"]
    await bot.send(event)

    def listed(fake: Any) -> Any:
        message = approval_message(fake, root)
        calls_shown = message and [f for f in forms(message.content) if f != "batch_form"]
        return message if calls_shown and len(calls_shown) == len(calls) else None

    return await bot.fake.wait_for(listed, 15)


def by_name(rows: list[Approval]) -> dict[str, Approval]:
    return {row.arguments["name"]: row for row in rows}


async def test_feishu_one_card_per_batch_with_mixed_decisions(
    feishu_bot: FeishuBot, fake_openai: FakeOpenAI, ops_api: OpsAPI, db_rows
) -> None:
    card = await ask_batch(feishu_bot, fake_openai, ("api", "dev"), ("web", "dev"))
    assert elements_problem(card.contents[-1]) is None  # Feishu would take it
    assert card.content["header"]["title"]["content"] == "Approval needed: 2 calls"
    assert forms(card.content)[-1] == "batch_form"
    rows = by_name(db_rows(Approval))
    fake = feishu_bot.fake

    _status, answer = await feishu_bot.send(
        fake.card_action(card.message_id, "approve", user="ou_lead", button_of=rows["api"].id)
    )
    assert answer["toast"]["type"] == "success"
    shown = answer["card"]["data"]  # the batch card as it stands, never the call's alone
    assert shown["header"]["title"]["content"] == "Approval needed: 2 calls"
    assert forms(shown) == [f"approval_form__{rows['web'].id}"]  # api folded: no form of its
    assert elements_problem(json.dumps(shown)) is None

    _status, answer = await feishu_bot.send(
        fake.card_action(card.message_id, "reject", user="ou_lead", reason="not web today",
                         button_of=rows["web"].id)
    )  # fmt: skip
    await feishu_bot.wait_idle()
    assert answer["card"]["data"]["header"]["title"]["content"] == "Approvals: 2 calls"
    assert ops_api.restarts == ["api"]
    assert any("not web today" in t for t in tool_texts(fake_openai))
    logged = {row.arguments["name"]: row for row in db_rows(CallLog)}
    assert logged["api"].approval_status == "approved"
    assert (logged["web"].approval_status, logged["web"].approval_comment) == (
        "rejected", "not web today"
    )  # fmt: skip
    folded = json.loads(fake.messages[card.message_id].contents[-1])
    assert folded["header"]["title"]["content"] == "Approvals: 2 calls" and not forms(folded)
    text = json.dumps(folded, ensure_ascii=False)
    assert "**Approved**" in text and "**Rejected**" in text and "not web today" in text


async def test_feishu_approve_all_only_for_someone_eligible_for_every_call(
    feishu_bot: FeishuBot, fake_openai: FakeOpenAI, ops_api: OpsAPI, db_rows
) -> None:
    card = await ask_batch(feishu_bot, fake_openai, ("api", "dev"), ("web", "production"))
    fake = feishu_bot.fake
    _status, refused = await feishu_bot.send(
        fake.card_action(card.message_id, "approve_all", user="ou_lead2")
    )
    assert refused["toast"]["type"] == "error"
    assert "nothing was decided" in refused["toast"]["content"]
    assert db_rows(ApprovalDecision) == []
    # forged: the batch's button naming an approval of another card decides nothing either
    _status, forged = await feishu_bot.send(
        fake.card_action(card.message_id, "approve_all", user="ou_lead", approval_id="0" * 32)
    )
    assert forged["toast"]["type"] == "error" and db_rows(ApprovalDecision) == []

    _status, answer = await feishu_bot.send(
        fake.card_action(card.message_id, "approve_all", user="ou_lead")
    )
    assert answer["toast"]["type"] == "success", answer
    now = by_name(db_rows(Approval))
    assert now["api"].status == ApprovalStatus.APPROVED
    assert now["web"].status == ApprovalStatus.PENDING  # one of its two leads so far
    assert "1 of 2" in json.dumps(answer["card"]["data"])
    await feishu_bot.send(
        fake.card_action(card.message_id, "approve", user="ou_lead2", button_of=now["web"].id)
    )
    await feishu_bot.wait_idle()
    assert sorted(ops_api.restarts) == ["api", "web"]
