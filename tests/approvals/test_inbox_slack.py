"""One inbox per approver on Slack: the App Home says "Waiting for you", through the real
entry points (signed `app_home_opened` events and `block_actions` from the home view to
`/slack/events`), with every `views.publish` checked by the fake against slack_sdk's View
model. The home lists what this person may approve now, with a link to the card, its age and
expiry and the card's buttons; a click there decides through the broker's own checks; a
decision anywhere publishes the home again; the list survives a restart. SQLite and
PostgreSQL.

The `rules` manifest (tests/approvals/conftest.py): a restart on dev asks U0LEAD; on
production two of the leads (U0LEAD, U0LEAD2), never the requester.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bot.clock import ManualClock
from bot.config import Settings
from bot.server import create_app
from bot.storage.models import Approval
from bot.surfaces.slack.cards import (
    APPROVE_ACTION,
    APPROVE_THREAD_ACTION,
    CHANGES_ACTION,
    EDIT_ACTION,
    REJECT_ACTION,
    REJECT_MODAL,
)
from tests.approvals.conftest import write_manifest
from tests.approvals.test_rules import restart
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.ops_api import OpsAPI
from tests.fakes.slack_api import FakeSlack
from tests.security.conftest import approval_cards, is_pending, wait_cards
from tests.slack.e2e import SlackBot, bot_settings
from tests.slack.payloads import block_actions, home_actions, home_opened, mention, submitted

pytestmark = pytest.mark.both_databases

NOTHING = "Nothing is waiting for you."


@pytest.fixture
def home_settings(
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
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
async def home_bot(
    home_settings: Settings, fake_slack: FakeSlack, clock: ManualClock, aiohttp_client: Any
) -> SlackBot:
    return SlackBot(await aiohttp_client(create_app(home_settings, clock=clock)), fake_slack)


def home_text(fake: FakeSlack, user: str) -> str:
    return json.dumps(fake.homes.get(user, {}), ensure_ascii=False)


def listed(fake: FakeSlack, user: str) -> list[str]:
    """The approval ids on `user`'s published home, in order (from its Approve buttons)."""
    return [
        element["value"]
        for block in fake.homes.get(user, {}).get("blocks", [])
        if block.get("type") == "actions"
        for element in block["elements"]
        if element["action_id"] == APPROVE_ACTION
    ]


async def ask(bot: SlackBot, fake: FakeSlack, openai: FakeOpenAI, env: str) -> dict[str, Any]:
    """U0DEV asks for a restart of api on `env`; its pending card (with the thread's root as
    `root`)."""
    openai.script(*restart("api", env))
    event = mention(f"restart api on {env}", user="U0DEV")
    await bot.send(event)
    [card] = await wait_cards(fake, event["event"]["ts"], 1)
    return {**card, "root": event["event"]["ts"]}


async def test_the_home_lists_what_waits_and_a_click_there_decides(
    home_bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, ops_api: OpsAPI,
    clock: ManualClock, db_rows,
) -> None:  # fmt: skip
    assert await home_bot.send(home_opened("U0LEAD")) == 200
    await fake_slack.wait_for(lambda: "U0LEAD" in fake_slack.homes)
    assert "Waiting for you" in home_text(fake_slack, "U0LEAD")
    assert NOTHING in home_text(fake_slack, "U0LEAD")

    card = await ask(home_bot, fake_slack, fake_openai, "dev")
    [approval] = db_rows(Approval)
    # asking published the approver's home again, without them opening it
    await fake_slack.wait_for(lambda: listed(fake_slack, "U0LEAD") == [approval.id])
    clock.advance(300)
    await home_bot.send(home_opened("U0LEAD"))
    await fake_slack.wait_for(lambda: "asked 5 min ago" in home_text(fake_slack, "U0LEAD"))
    home = fake_slack.homes["U0LEAD"]
    shown = json.dumps(home, ensure_ascii=False)
    assert "asked 5 min ago \u00b7 expires in 55 min" in shown
    assert "Approval needed: ops.restart" in shown and "Open the card" in shown
    [link] = fake_slack.calls("chat.getPermalink")[-1:]
    assert link.args["message_ts"] == card["ts"]  # the link goes to the card itself
    buttons = {e["action_id"] for b in home["blocks"] if b["type"] == "actions"
               for e in b["elements"]}  # fmt: skip
    assert {APPROVE_ACTION, REJECT_ACTION, EDIT_ACTION, CHANGES_ACTION} <= buttons

    # the requester's home shows nothing to decide (four-eyes: it is not theirs)
    await home_bot.send(home_opened("U0DEV"))
    await fake_slack.wait_for(lambda: NOTHING in home_text(fake_slack, "U0DEV"))

    await home_bot.send(home_actions(home, approval.id, APPROVE_ACTION, user="U0LEAD"))
    await home_bot.wait_idle()
    assert ops_api.restarts == ["api"]
    [approval] = db_rows(Approval)
    assert (approval.status, approval.decided_by) == ("approved", ["U0LEAD"])
    # every copy follows: the card in the thread folds, the home is published empty
    await fake_slack.wait_for(lambda: not is_pending(approval_cards(fake_slack, card["root"])[0]))
    await fake_slack.wait_for(lambda: NOTHING in home_text(fake_slack, "U0LEAD"))


async def test_a_home_click_is_judged_like_a_card_click(
    home_bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, ops_api: OpsAPI, db_rows
) -> None:
    """Someone who may not decide gets nothing from a home payload naming the approval (the
    requester, four-eyes); Reject from the home opens the same dialog, and its submission
    rejects with the reason."""
    await ask(home_bot, fake_slack, fake_openai, "dev")
    [approval] = db_rows(Approval)
    await fake_slack.wait_for(lambda: listed(fake_slack, "U0LEAD") == [approval.id])
    home = fake_slack.homes["U0LEAD"]

    await home_bot.send(home_actions(home, approval.id, APPROVE_ACTION, user="U0DEV"))
    await home_bot.send(home_actions(home, approval.id, APPROVE_ACTION, user="U0NOBODY"))
    # (`send` returns once the inbox has applied what it stored: these were judged)
    assert ops_api.restarts == []
    assert db_rows(Approval)[0].status == "pending"

    await home_bot.send(home_actions(home, approval.id, REJECT_ACTION, user="U0LEAD"))
    opened = await fake_slack.wait_for(lambda: fake_slack.calls("views.open"))
    view = opened[0].args["view"]
    assert view["callback_id"] == REJECT_MODAL
    reason = {"reason": {"reason_input": {"type": "plain_text_input", "value": "not today"}}}
    await home_bot.send(submitted(view, reason, user="U0LEAD"))
    await home_bot.wait_idle()
    [approval] = db_rows(Approval)
    assert (approval.status, approval.decision_reason) == ("rejected", "not today")
    assert ops_api.restarts == []
    await fake_slack.wait_for(lambda: NOTHING in home_text(fake_slack, "U0LEAD"))


async def test_a_quorum_leaves_the_home_of_who_approved_and_stays_in_the_other(
    home_bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, ops_api: OpsAPI, db_rows
) -> None:
    """Production needs two leads: both homes list it (no "approve for this thread" there);
    one approves on the card, their home drops it, the other's still asks; the other approves
    from the home and it runs."""
    card = await ask(home_bot, fake_slack, fake_openai, "production")
    [approval] = db_rows(Approval)
    for lead in ("U0LEAD", "U0LEAD2"):
        await fake_slack.wait_for(lambda u=lead: listed(fake_slack, u) == [approval.id])
    assert APPROVE_THREAD_ACTION not in home_text(fake_slack, "U0LEAD")
    assert "0 of 2 approvals" in home_text(fake_slack, "U0LEAD2")

    await home_bot.send(block_actions(card, APPROVE_ACTION, user="U0LEAD"))
    await fake_slack.wait_for(lambda: listed(fake_slack, "U0LEAD") == [])
    await fake_slack.wait_for(lambda: "1 of 2 approvals" in home_text(fake_slack, "U0LEAD2"))
    assert ops_api.restarts == []

    home = fake_slack.homes["U0LEAD2"]
    await home_bot.send(home_actions(home, approval.id, APPROVE_ACTION, user="U0LEAD2"))
    await home_bot.wait_idle()
    assert ops_api.restarts == ["api"]
    await fake_slack.wait_for(lambda: NOTHING in home_text(fake_slack, "U0LEAD2"))


async def test_the_home_after_a_restart_still_lists_the_approval_and_decides_it(
    home_bot: SlackBot, home_settings: Settings, fake_slack: FakeSlack, fake_openai: FakeOpenAI,
    ops_api: OpsAPI, clock: ManualClock, aiohttp_client: Any, db_rows,
) -> None:  # fmt: skip
    await ask(home_bot, fake_slack, fake_openai, "dev")
    [approval] = db_rows(Approval)
    await home_bot.client.close()  # the bot stops while the approval waits
    fake_slack.homes.clear()
    restarted = SlackBot(await aiohttp_client(create_app(home_settings, clock=clock)), fake_slack)
    await restarted.send(home_opened("U0LEAD"))
    await fake_slack.wait_for(lambda: listed(fake_slack, "U0LEAD") == [approval.id])
    home = fake_slack.homes["U0LEAD"]
    await restarted.send(home_actions(home, approval.id, APPROVE_ACTION, user="U0LEAD"))
    await restarted.wait_idle()
    assert ops_api.restarts == ["api"]
    await fake_slack.wait_for(lambda: NOTHING in home_text(fake_slack, "U0LEAD"))
