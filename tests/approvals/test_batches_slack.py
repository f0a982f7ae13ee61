"""Batches on Slack: the calls of one model response that need approval share one card, each
call with its own buttons, plus Approve all / Reject all. Driven through the real app
(`create_app`) with signed `block_actions` and `view_submission`s to `/slack/events`, the card
validated by FakeSlack as Slack validates blocks, on SQLite and PostgreSQL.

The manifest is the rules one (tests/approvals/conftest.py): a restart on dev asks U0LEAD; on
production two leads (U0LEAD, U0LEAD2), never the requester (U0DEV).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bot.config import Settings
from bot.server import create_app
from bot.statuses import ApprovalStatus
from bot.storage.models import Approval, ApprovalDecision, CallLog
from bot.surfaces.slack.batch_card import APPROVE_ALL_ACTION, REJECT_ALL_ACTION
from bot.surfaces.slack.cards import APPROVE_ACTION, REJECT_ACTION
from tests.approvals.conftest import write_manifest
from tests.approvals.test_rules import tool_texts
from tests.fakes.openai_server import FakeOpenAI, tool_calls
from tests.fakes.ops_api import OpsAPI
from tests.fakes.slack_api import FakeSlack, valid_block
from tests.security.conftest import approval_cards, finishing
from tests.slack.e2e import SlackBot, bot_settings
from tests.slack.payloads import block_actions, mention, view_submission

pytestmark = pytest.mark.both_databases


def restarts(*calls: tuple[str, str]) -> list:
    """One response asking for several restarts (name, env) at once, then the answer."""
    return finishing(
        tool_calls(*(("ops__restart", {"name": name, "env": env}) for name, env in calls))
    )


def call_ids(card: dict[str, Any]) -> list[str]:
    """The approvals a card lists, in order (from their own Approve buttons)."""
    return [
        e["value"]
        for b in card.get("blocks", [])
        if b.get("type") == "actions"
        for e in b["elements"]
        if e["action_id"] == APPROVE_ACTION
    ]


def the_card(fake: FakeSlack, root: str) -> dict[str, Any]:
    [card] = approval_cards(fake, root)  # ONE card for the batch, never one per call
    return card


async def ask_batch(
    bot: SlackBot, fake: FakeSlack, openai: FakeOpenAI, *calls: tuple[str, str]
) -> tuple[str, dict[str, Any]]:
    """U0DEV asks; the batch card once it lists every call."""
    openai.script(*restarts(*calls))
    event = mention("restart them", user="U0DEV")
    root = event["event"]["ts"]
    await bot.send(event)
    card = await fake.wait_for(
        lambda: (cards := approval_cards(fake, root)) and len(call_ids(cards[0])) == len(calls)
        and cards[0], 15,
    )  # fmt: skip
    return root, card


def by_name(rows: list[Approval]) -> dict[str, Approval]:
    return {row.arguments["name"]: row for row in rows}


@pytest.fixture
def settings(
    tmp_path: Path, database_url: str, ops_api: OpsAPI, fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
) -> Settings:  # fmt: skip
    return bot_settings(
        database_url=database_url,
        manifests=write_manifest(tmp_path, ops_api.url, lead="U0LEAD"),
        slack=fake_slack,
        llm_url=fake_openai.base_url,
        chatops_approver_groups={"leads": ["U0LEAD", "U0LEAD2"]},
    )


@pytest.fixture
async def bot(settings: Settings, fake_slack: FakeSlack, aiohttp_client: Any) -> SlackBot:
    return SlackBot(await aiohttp_client(create_app(settings)), fake_slack)


async def test_one_card_lists_the_batch_and_mixed_decisions_reach_the_model_and_the_log(
    bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, ops_api: OpsAPI, db_rows
) -> None:
    root, card = await ask_batch(bot, fake_slack, fake_openai, ("api", "dev"), ("web", "dev"))
    rows = by_name(db_rows(Approval))
    assert set(rows) == {"api", "web"}
    assert rows["api"].batch_id and rows["api"].batch_id == rows["web"].batch_id
    assert rows["api"].fingerprint != rows["web"].fingerprint  # each call its own approval
    assert all(valid_block(b) for b in card["blocks"])
    assert card["blocks"][0]["text"]["text"] == "Approval needed: 2 calls"
    shown = json.dumps(card["blocks"])
    assert '\\"name\\": \\"api\\"' in shown and '\\"name\\": \\"web\\"' in shown
    batch = [e["action_id"] for b in card["blocks"] if b.get("block_id") == "chatops_batch"
             for e in b["elements"]]  # fmt: skip
    assert batch == [APPROVE_ALL_ACTION, REJECT_ALL_ACTION]

    await bot.send(block_actions(card, APPROVE_ACTION, user="U0LEAD", value=rows["api"].id))
    await fake_slack.wait_for(
        lambda: len(call_ids(the_card(fake_slack, root))) == 1, 10
    )  # the decided call folded to its line; the other still has its buttons
    assert ops_api.restarts == ["api"]  # each call runs once it is approved
    card = the_card(fake_slack, root)
    await bot.send(block_actions(card, REJECT_ACTION, user="U0LEAD", value=rows["web"].id))
    [opened] = await fake_slack.wait_for(lambda: fake_slack.calls("views.open"), 10)
    await bot.send(view_submission(opened.args["view"], user="U0LEAD", reason="not web today"))
    await bot.wait_idle()

    assert ops_api.restarts == ["api"]
    texts = tool_texts(fake_openai)
    assert any("not web today" in t and "REJECTED" in t.upper() for t in texts)
    logged = {row.arguments["name"]: row for row in db_rows(CallLog)}
    assert logged["api"].approval_status == "approved" and logged["api"].result_status == "ok"
    assert logged["web"].approval_status == "rejected"
    assert logged["api"].approval_id == rows["api"].id
    assert logged["web"].approval_id == rows["web"].id

    folded = await fake_slack.wait_for(
        lambda: (c := the_card(fake_slack, root))["blocks"][0]["text"]["text"]
        == "Approvals: 2 calls" and c, 10,
    )  # fmt: skip
    assert all(valid_block(b) for b in folded["blocks"])
    lines = {b["accessory"]["value"]: b["text"]["text"] for b in folded["blocks"]
             if b["type"] == "section"}  # fmt: skip  # each call's line, by its approval
    assert ":white_check_mark: Approved by <@U0LEAD>" in lines[rows["api"].id]
    assert ":no_entry: Rejected by <@U0LEAD>" in lines[rows["web"].id]
    assert not call_ids(folded) and "not web today" in json.dumps(folded["blocks"])


async def test_approve_all_is_refused_to_someone_eligible_for_only_some_calls(
    bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, ops_api: OpsAPI, db_rows
) -> None:
    root, card = await ask_batch(
        bot, fake_slack, fake_openai, ("api", "dev"), ("web", "production")
    )
    rows = by_name(db_rows(Approval))
    # U0LEAD2 may approve production, not dev: "all" decides NOTHING
    await bot.click(card, APPROVE_ALL_ACTION, user="U0LEAD2")
    told = await fake_slack.wait_for(lambda: fake_slack.calls("chat.postEphemeral"), 10)
    assert told[0].args["user"] == "U0LEAD2" and "nothing was decided" in told[0].args["text"]
    assert db_rows(ApprovalDecision) == []
    assert {r.status for r in db_rows(Approval)} == {ApprovalStatus.PENDING}
    # Reject all is refused to them too: they may not reject dev
    await bot.click(card, REJECT_ALL_ACTION, user="U0LEAD2")
    await fake_slack.wait_for(lambda: len(fake_slack.calls("chat.postEphemeral")) >= 2, 10)
    assert {r.status for r in db_rows(Approval)} == {ApprovalStatus.PENDING}

    # U0LEAD may approve both: dev is decided, production counts one of its two
    await bot.click(card, APPROVE_ALL_ACTION, user="U0LEAD")
    await fake_slack.wait_for(lambda: "1 of 2 approvals" in json.dumps(
        the_card(fake_slack, root)["blocks"]), 10)  # fmt: skip
    now = by_name(db_rows(Approval))
    assert now["api"].status == ApprovalStatus.APPROVED
    assert now["web"].status == ApprovalStatus.PENDING
    await bot.send(block_actions(the_card(fake_slack, root), APPROVE_ACTION, user="U0LEAD2",
                                 value=rows["web"].id))  # fmt: skip
    await bot.wait_idle()
    assert sorted(ops_api.restarts) == ["api", "web"]


async def test_a_forged_or_replayed_approve_all_decides_nothing(
    bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, ops_api: OpsAPI, db_rows
) -> None:
    root, card = await ask_batch(bot, fake_slack, fake_openai, ("api", "dev"), ("web", "dev"))
    card = json.loads(json.dumps(card))  # as it was when clicked (the fake edits its copy)
    # the batch's id on another message (the thread's root): not this card, nothing decided
    await bot.send(block_actions(card, APPROVE_ALL_ACTION, user="U0LEAD", message_ts=root))
    await fake_slack.wait_for(lambda: fake_slack.calls("chat.postEphemeral"), 10)
    assert db_rows(ApprovalDecision) == []
    await bot.click(card, APPROVE_ALL_ACTION, user="U0LEAD")
    await bot.wait_idle()
    assert sorted(ops_api.restarts) == ["api", "web"]
    decisions = len(db_rows(ApprovalDecision))
    await bot.click(card, APPROVE_ALL_ACTION, user="U0LEAD")  # replayed
    await bot.click(card, REJECT_ALL_ACTION, user="U0LEAD")
    await bot.wait_idle()
    assert len(db_rows(ApprovalDecision)) == decisions
    assert {r.status for r in db_rows(Approval)} == {ApprovalStatus.APPROVED}
    assert sorted(ops_api.restarts) == ["api", "web"]


async def test_a_pending_batch_survives_a_restart_and_its_card_decides_there(
    bot: SlackBot, settings: Settings, fake_slack: FakeSlack, fake_openai: FakeOpenAI,
    ops_api: OpsAPI, aiohttp_client: Any, db_rows,
) -> None:  # fmt: skip
    root, card = await ask_batch(bot, fake_slack, fake_openai, ("api", "dev"), ("web", "dev"))
    card = json.loads(json.dumps(card))
    await bot.client.close()  # the bot stops while the batch waits
    restarted = SlackBot(await aiohttp_client(create_app(settings)), fake_slack)
    await restarted.click(card, REJECT_ALL_ACTION, user="U0LEAD")
    await restarted.wait_idle()
    assert ops_api.restarts == []
    assert {r.status for r in db_rows(Approval)} == {ApprovalStatus.REJECTED}
    assert {r.approval_status for r in db_rows(CallLog)} == {"rejected"}
    folded = await fake_slack.wait_for(
        lambda: (c := the_card(fake_slack, root))["blocks"][0]["text"]["text"]
        == "Approvals: 2 calls" and c, 10,
    )  # fmt: skip
    assert [b["text"]["text"].count("Rejected") for b in folded["blocks"]
            if b["type"] == "section"] == [1, 1]  # fmt: skip
