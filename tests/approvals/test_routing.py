"""Approval routing through the real entry points: a rule sends production's card to an
approvals channel (the thread says so, the card links back) and staging's to each lead's DM.
Clicks on any copy are checked exactly as in the thread, and a decision edits every copy, also
after a restart. Slack (signed clicks), Feishu (card callbacks) and the console, on SQLite and
PostgreSQL."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from bot.server import create_app
from bot.storage.models import Approval, ApprovalCard
from bot.surfaces.slack.cards import APPROVE_ACTION
from tests.approvals.conftest import APPROVALS_CHANNEL, APPROVALS_CHAT
from tests.approvals.test_rules import restart
from tests.fakes.feishu_api import FakeFeishu
from tests.fakes.feishu_events import FakeMessage
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.ops_api import OpsAPI
from tests.fakes.slack_api import FakeSlack
from tests.feishu.e2e import FeishuBot, has_form
from tests.security.conftest import approval_cards, ephemeral_to, is_pending
from tests.server.conftest import ConsoleClient
from tests.slack.e2e import SlackBot
from tests.slack.payloads import CHANNEL, block_actions, mention


async def eventually(predicate: Callable[[], Any], within: float = 10) -> Any:
    """Poll `predicate` (a database read: no fake sees it change) until it holds."""
    async with asyncio.timeout(within):
        while not (value := predicate()):  # noqa: ASYNC110 - a database has no event to await
            await asyncio.sleep(0.02)
    return value


def cards_in_channel(fake: FakeSlack, channel: str) -> list[dict[str, Any]]:
    """Approval cards (by their header) posted at the top of a channel, oldest first."""
    found = [
        m
        for (ch, _), m in fake.messages.items()
        if ch == channel and m.get("blocks") and m["blocks"][0].get("type") == "header"
    ]
    return sorted(found, key=lambda m: m["ts"])


async def click(bot: SlackBot, card: dict[str, Any], channel: str, user: str) -> None:
    await bot.send(block_actions(card, APPROVE_ACTION, user=user, channel=channel))


def ops_refused(fake: FakeSlack, user: str) -> bool:
    return any("not one of the approvers" in t for t in ephemeral_to(fake, user))


async def test_slack_a_card_routed_to_the_approvals_channel_is_decided_there(
    routed_slack: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, ops_api: OpsAPI,
    db_rows,
) -> None:  # fmt: skip
    fake_openai.script(*restart("api", "production"))
    event = mention("restart api on production", user="U0DEV")
    root = event["event"]["ts"]
    await routed_slack.send(event)
    [card] = await fake_slack.wait_for(lambda: cards_in_channel(fake_slack, APPROVALS_CHANNEL))
    assert "thread_ts" not in card  # at the top of the approvals channel
    link = f"https://fake-team.slack.com/archives/{CHANNEL}/p{root.replace('.', '')}"
    assert link in json.dumps(card["blocks"])  # the way back to the request
    [permalink] = fake_slack.calls("chat.getPermalink")
    assert (permalink.args["channel"], permalink.args["message_ts"]) == (CHANNEL, root)
    await fake_slack.wait_for(lambda: any(
        m["text"] == f"Waiting for approval in <#{APPROVALS_CHANNEL}>."
        for m in fake_slack.thread_messages(CHANNEL, root)
    ))  # fmt: skip
    assert approval_cards(fake_slack, root) == []  # no card in the thread itself

    await click(routed_slack, card, APPROVALS_CHANNEL, "U0EVIL")  # sees the channel, no approver
    await click(routed_slack, card, CHANNEL, "U0LEAD")  # the right id, not on this card's copy
    assert ops_refused(fake_slack, "U0EVIL") and ops_api.calls == []
    assert is_pending(cards_in_channel(fake_slack, APPROVALS_CHANNEL)[0])
    await click(routed_slack, card, APPROVALS_CHANNEL, "U0LEAD")
    await routed_slack.wait_idle()
    assert ops_api.restarts == ["api"]
    [decided] = cards_in_channel(fake_slack, APPROVALS_CHANNEL)
    assert not is_pending(decided) and "U0LEAD" in json.dumps(decided["blocks"])
    [approval] = db_rows(Approval)
    assert (approval.status, approval.route) == ("approved", f"channel:{APPROVALS_CHANNEL}")
    [copy] = db_rows(ApprovalCard)
    assert (copy.kind, copy.channel, copy.message_id) == ("channel", APPROVALS_CHANNEL, card["ts"])


async def test_slack_dm_route_each_lead_gets_the_card_and_a_restart_keeps_the_copies(
    routed_slack: SlackBot,
    routed_slack_settings,
    clock,
    fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
    ops_api: OpsAPI,
    aiohttp_client,
    db_rows,
) -> None:
    """Both leads are DM'd (conversations.open); clicks on a DM copy by a non-approver and by
    the requester are refused; after a restart, the second lead's click on their copy decides and
    both copies show the outcome."""
    fake_openai.script(*restart("web", "staging"))
    event = mention("restart web on staging", user="U0DEV")
    root = event["event"]["ts"]
    await routed_slack.send(event)
    await eventually(lambda: len(db_rows(ApprovalCard)) == 2)
    opened = sorted(c.args["users"] for c in fake_slack.calls("conversations.open"))
    assert opened == ["U0LEAD", "U0LEAD2"]
    dm = {user: fake_slack.dms[user] for user in opened}
    [lead_card] = cards_in_channel(fake_slack, dm["U0LEAD"])
    [lead2_card] = cards_in_channel(fake_slack, dm["U0LEAD2"])
    await fake_slack.wait_for(lambda: any(
        "by direct message" in m["text"] for m in fake_slack.thread_messages(CHANNEL, root)
    ))  # fmt: skip
    assert approval_cards(fake_slack, root) == []

    await click(routed_slack, lead_card, dm["U0LEAD"], "U0EVIL")
    await click(routed_slack, lead_card, dm["U0LEAD"], "U0DEV")  # the requester
    assert ops_refused(fake_slack, "U0EVIL") and ops_refused(fake_slack, "U0DEV")
    assert ops_api.calls == []

    await routed_slack.client.close()  # the bot stops while the approval waits
    restarted = SlackBot(
        await aiohttp_client(create_app(routed_slack_settings, clock=clock)), fake_slack
    )
    await click(restarted, lead2_card, dm["U0LEAD2"], "U0LEAD2")
    await restarted.wait_idle()
    await ops_api.wait_for(lambda: ops_api.restarts == ["web"])
    for user in opened:
        [copy] = await fake_slack.wait_for(
            lambda u=user: [c for c in cards_in_channel(fake_slack, dm[u]) if not is_pending(c)]
        )
        assert "U0LEAD2" in json.dumps(copy["blocks"])
    [approval] = db_rows(Approval)
    assert (approval.status, approval.decided_by) == ("approved", ["U0LEAD2"])
    assert sorted(c.user_id for c in db_rows(ApprovalCard, kind="dm")) == opened


def feishu_cards_in(fake: FakeFeishu, chat: str) -> list[FakeMessage]:
    return [m for m in fake.messages.values() if m.chat_id == chat and m.msg_type == "interactive"]


async def feishu_click(bot: FeishuBot, card: FakeMessage, user: str) -> Any:
    action = bot.fake.card_action(card.message_id, "approve", user=user, chat_id=card.chat_id)
    return await bot.send(action)


async def test_feishu_channel_and_dm_routes(
    routed_feishu: FeishuBot, fake_openai: FakeOpenAI, ops_api: OpsAPI, db_rows
) -> None:
    fake = routed_feishu.fake
    fake_openai.script(*restart("api", "production"), *restart("web", "staging"))
    event = fake.message_event("restart api on production", user="ou_dev")
    root = event["event"]["message"]["message_id"]
    await routed_feishu.send(event)
    [card] = await fake.wait_for(lambda f: feishu_cards_in(f, APPROVALS_CHAT))
    [create] = [c for c in fake.calls("message.create") if c.body["msg_type"] == "interactive"]
    assert create.query["receive_id_type"] == "chat_id"
    assert "openChatId=" in card.contents[0]  # the copy links to the requesting chat
    await fake.wait_for(
        lambda f: any("approvals chat" in m.contents[-1] for m in f.replies_to(root))
    )
    _, answer = await feishu_click(routed_feishu, card, "ou_evil")
    assert "not one of the approvers" in json.dumps(answer) and ops_api.calls == []
    await feishu_click(routed_feishu, card, "ou_lead")
    await routed_feishu.wait_idle()
    assert ops_api.restarts == ["api"]
    assert not has_form(json.loads(fake.messages[card.message_id].contents[-1]))

    event = fake.message_event("restart web on staging", user="ou_dev")
    await routed_feishu.send(event)
    dms = ["oc_p2p_ou_lead", "oc_p2p_ou_lead2"]
    await fake.wait_for(lambda f: all(feishu_cards_in(f, chat) for chat in dms))
    await eventually(lambda: len(db_rows(ApprovalCard, kind="dm")) == 2)
    sent = [c for c in fake.calls("message.create") if c.query["receive_id_type"] == "open_id"]
    assert sorted(c.body["receive_id"] for c in sent) == ["ou_lead", "ou_lead2"]
    [lead2_card] = feishu_cards_in(fake, "oc_p2p_ou_lead2")
    _, answer = await feishu_click(routed_feishu, lead2_card, "ou_dev")  # the requester
    assert "not one of the approvers" in json.dumps(answer)
    await feishu_click(routed_feishu, lead2_card, "ou_lead2")
    await routed_feishu.wait_idle()
    assert ops_api.restarts == ["api", "web"]
    for chat in dms:
        [copy] = feishu_cards_in(fake, chat)
        assert not has_form(json.loads(fake.messages[copy.message_id].contents[-1]))
    statuses = sorted((a.route, a.status) for a in db_rows(Approval))
    assert statuses == [("channel:oc_approvals", "approved"), ("dm", "approved")]


async def test_console_routed_card_is_in_the_approvals_view_and_decided_there(
    routed_console: ConsoleClient, fake_openai: FakeOpenAI, ops_api: OpsAPI, db_rows
) -> None:
    fake_openai.script(*restart("api", "production"))
    assert (await routed_console.send("restart api", user="dev")).status == 202
    card = await routed_console.wait_item(
        lambda i: i["kind"] == "approval" and i["thread"] == "approvals"
    )
    notice = await routed_console.wait_item(lambda i: i["kind"] == "notice")
    assert "approvals view" in notice["data"]["text"] and notice["thread"] != "approvals"
    assert card["data"]["thread_link"] == f"/c/{notice['thread']}"
    assert notice["data"]["link"] == "/approvals"
    approval_id = card["data"]["approval_id"]
    assert (await routed_console.decide(approval_id, "approve", user="mallory")).status == 403
    assert (await routed_console.decide(approval_id, "approve", user="lead2")).status == 200
    await ops_api.wait_for(lambda: ops_api.restarts == ["api"])
    await routed_console.wait_item(
        lambda i: i["id"] == card["id"] and i["data"]["state"] == "approved"
    )
    [approval] = db_rows(Approval)
    assert approval.decided_by == ["lead2"]
