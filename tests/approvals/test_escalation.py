"""The escalation ladder with a controllable clock (`ManualClock`, injected into the app): on
qa the lead alone may approve; after 600 s with no decision the SRE manager is added, mentioned
and shown on the card, and only then may approve. Slack (signed clicks), Feishu (card
callbacks) and the console (HTTP routes), on SQLite and PostgreSQL."""

from __future__ import annotations

import json

from bot.clock import ManualClock
from bot.server import create_app
from bot.storage.models import Approval
from bot.surfaces.slack.cards import APPROVE_ACTION, CARD_DETAILS_ACTION
from tests.approvals.test_routing import eventually
from tests.approvals.test_rules import restart
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.ops_api import OpsAPI
from tests.fakes.slack_api import FakeSlack
from tests.feishu.e2e import FeishuBot, has_form
from tests.feishu.e2e import wait_card as wait_feishu_card
from tests.security.conftest import ephemeral_to, is_pending, wait_cards
from tests.server.conftest import ConsoleClient
from tests.slack.e2e import SlackBot
from tests.slack.payloads import CHANNEL, block_actions, mention

ESCALATED = "escalated to U0BOSS after 10 min (paging the SRE manager)"


async def test_slack_the_manager_may_approve_only_after_the_tier_is_reached(
    routed_slack: SlackBot,
    fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
    ops_api: OpsAPI,
    clock: ManualClock,
    db_rows,
) -> None:
    fake_openai.script(*restart("api", "qa"))
    event = mention("restart api on qa", user="U0DEV")
    root = event["event"]["ts"]
    await routed_slack.send(event)
    [card] = await wait_cards(fake_slack, root, 1)
    await routed_slack.click(card, APPROVE_ACTION, user="U0BOSS")  # before the tier: refused
    assert any("not one of the approvers" in t for t in ephemeral_to(fake_slack, "U0BOSS"))
    clock.advance(599)
    await routed_slack.click(card, APPROVE_ACTION, user="U0BOSS")  # still a second early
    assert len(ephemeral_to(fake_slack, "U0BOSS")) == 2 and ops_api.calls == []
    [approval] = db_rows(Approval)
    assert (approval.escalation_level, approval.approvers) == (0, ["U0LEAD"])

    clock.advance(2)  # 601 s without a decision: the manager is added and mentioned
    notice = await fake_slack.wait_for(lambda: next(
        (m for m in fake_slack.thread_messages(CHANNEL, root) if "<@U0BOSS>" in m["text"]), None
    ))  # fmt: skip
    assert "paging the SRE manager" in notice["text"]
    await fake_slack.wait_for(
        lambda: ESCALATED in json.dumps(fake_slack.thread_messages(CHANNEL, root))
    )
    [approval] = await eventually(lambda: db_rows(Approval, escalation_level=1))
    assert approval.approvers == ["U0LEAD", "U0BOSS"] and approval.status == "pending"
    await routed_slack.click(card, APPROVE_ACTION, user="U0BOSS")
    await routed_slack.wait_idle()
    assert ops_api.restarts == ["api"]
    [approval] = db_rows(Approval)
    assert (approval.status, approval.decided_by) == ("approved", ["U0BOSS"])
    [ended] = [m for m in fake_slack.thread_messages(CHANNEL, root) if m["ts"] == card["ts"]]
    assert not is_pending(ended)  # folded: the tier is among the details, a click away
    await routed_slack.send(block_actions(ended, CARD_DETAILS_ACTION, user="U0DEV"))
    [opened] = fake_slack.calls("views.open")
    assert ESCALATED in json.dumps(opened.args["view"]["blocks"])


async def test_slack_escalation_never_approves_the_timeout_still_expires(
    routed_slack: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, ops_api: OpsAPI,
    clock: ManualClock, db_rows,
) -> None:  # fmt: skip
    fake_openai.script(*restart("api", "qa"))
    event = mention("restart api on qa", user="U0DEV")
    await routed_slack.send(event)
    await wait_cards(fake_slack, event["event"]["ts"], 1)
    clock.advance(601)
    await eventually(lambda: db_rows(Approval, escalation_level=1))
    clock.advance(3000)  # past the rule's timeout_s: 3600
    await routed_slack.wait_idle()
    [approval] = db_rows(Approval)
    assert (approval.status, approval.decided_by) == ("expired", [])
    assert ops_api.calls == []


async def test_feishu_the_manager_is_mentioned_and_may_approve_after_the_tier(
    routed_feishu: FeishuBot, fake_openai: FakeOpenAI, ops_api: OpsAPI, clock: ManualClock,
    db_rows,
) -> None:  # fmt: skip
    fake = routed_feishu.fake
    fake_openai.script(*restart("api", "qa"))
    event = fake.message_event("restart api on qa", user="ou_dev")
    root = event["event"]["message"]["message_id"]
    await routed_feishu.send(event)
    card = await wait_feishu_card(fake, root, pending=True)
    _, answer = await routed_feishu.click(card, "approve", user="ou_boss")
    assert "not one of the approvers" in json.dumps(answer)
    clock.advance(601)
    await fake.wait_for(
        lambda f: any('<at user_id=\\"ou_boss\\">' in m.contents[-1] for m in f.replies_to(root))
    )
    shown = card.message_id
    await fake.wait_for(lambda f: "escalated to ou_boss" in f.messages[shown].contents[-1])
    await routed_feishu.click(card, "approve", user="ou_boss")
    await routed_feishu.wait_idle()
    assert ops_api.restarts == ["api"]
    assert not has_form(fake.messages[card.message_id].content)
    [approval] = db_rows(Approval)
    assert (approval.status, approval.escalation_level) == ("approved", 1)


async def test_console_the_manager_is_refused_before_the_tier_and_decides_after(
    routed_console: ConsoleClient, fake_openai: FakeOpenAI, ops_api: OpsAPI, clock: ManualClock,
    db_rows,
) -> None:  # fmt: skip
    fake_openai.script(*restart("api", "qa"))
    assert (await routed_console.send("restart api on qa", user="dev")).status == 202
    card = await routed_console.wait_item(lambda i: i["kind"] == "approval")
    approval_id = card["data"]["approval_id"]
    assert (await routed_console.decide(approval_id, "approve", user="boss")).status == 403
    clock.advance(601)
    await routed_console.wait_item(
        lambda i: i["id"] == card["id"] and "escalated to boss" in " ".join(i["data"]["notes"])
    )
    notice = await routed_console.wait_item(lambda i: i["kind"] == "notice")
    assert notice["data"]["mention"] == ["boss"]
    assert (await routed_console.decide(approval_id, "approve", user="boss")).status == 200
    await ops_api.wait_for(lambda: ops_api.restarts == ["api"])
    [approval] = db_rows(Approval)
    assert (approval.status, approval.decided_by) == ("approved", ["boss"])


async def test_slack_a_tier_that_fell_due_while_the_bot_was_down_applies_after_a_restart(
    routed_slack: SlackBot,
    routed_slack_settings,
    fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
    ops_api: OpsAPI,
    clock: ManualClock,
    aiohttp_client,
    db_rows,
) -> None:
    """The tier's time comes from the approval's `created_at` in the database: a new process
    (same database, same clock) applies it once, and the manager's click on the old card
    decides."""
    fake_openai.script(*restart("api", "qa"))
    event = mention("restart api on qa", user="U0DEV")
    root = event["event"]["ts"]
    await routed_slack.send(event)
    [card] = await wait_cards(fake_slack, root, 1)
    await routed_slack.client.close()
    clock.advance(700)  # the tier fell due while nobody was running
    restarted = SlackBot(
        await aiohttp_client(create_app(routed_slack_settings, clock=clock)), fake_slack
    )
    await fake_slack.wait_for(
        lambda: any("<@U0BOSS>" in m["text"] for m in fake_slack.thread_messages(CHANNEL, root))
    )
    [approval] = await eventually(lambda: db_rows(Approval, escalation_level=1))
    await restarted.click(card, APPROVE_ACTION, user="U0BOSS")
    await restarted.wait_idle()
    await ops_api.wait_for(lambda: ops_api.restarts == ["api"])
    mentions = [m for m in fake_slack.thread_messages(CHANNEL, root) if "<@U0BOSS>" in m["text"]]
    assert len(mentions) == 1  # applied once
