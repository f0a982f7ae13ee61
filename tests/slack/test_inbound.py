"""The inbound path through bolt's real request handling: signatures, events, clicks, modals.

These drive `POST /slack/events` on an aiohttp app with only Slack mounted; the runtime is a
recording stand-in, so each test asserts exactly what the surface hands over (the end-to-end
tests in test_e2e.py use the real runtime).
"""

from __future__ import annotations

import asyncio
import json
import time

from bot.chat.threads import ThreadRef
from bot.chat.views import ApprovalCardView
from bot.surfaces.slack.cards import APPROVE_ACTION, APPROVE_THREAD_ACTION, REJECT_ACTION
from tests.fakes.slack_api import BOT_ID, BOT_USER_ID, TEAM_ID, FakeSlack
from tests.slack.payloads import (
    CHANNEL,
    as_body,
    block_actions,
    grant_submission,
    mention,
    message,
    signed_headers,
    view_submission,
)


async def post(client, payload, **sign) -> int:
    body = as_body(payload)
    response = await client.post("/slack/events", data=body, headers=signed_headers(body, **sign))
    await client.inbound.wait_idle(10)
    return response.status


async def test_mention_is_dispatched_with_thread_key_and_clean_text(slack_client, surface_runtime):
    event = mention("restart the *api* &amp; check <#C1|ops>", user="U0DEV")
    assert await post(slack_client, event) == 200
    [msg] = surface_runtime.run_manager.dispatched
    ts = event["event"]["ts"]
    assert msg.thread == ThreadRef("slack", TEAM_ID, CHANNEL, ts)
    assert msg.event_id == event["event_id"]
    assert msg.user_id == "U0DEV"
    assert msg.mentions_bot is True
    assert msg.text == "restart the *api* & check <#C1|ops>"
    assert msg.message_id == ts


async def test_mention_inside_a_thread_keys_on_thread_ts(slack_client, surface_runtime):
    await post(slack_client, mention("again", thread_ts="1700000000.000001"))
    [msg] = surface_runtime.run_manager.dispatched
    assert msg.thread.root == "1700000000.000001"


async def test_bad_signature_is_401_and_nothing_dispatched(
    slack_client, surface_runtime, fake_slack
):
    status = await post(slack_client, mention("hi"), secret="not-the-secret")
    assert status == 401
    assert surface_runtime.run_manager.dispatched == []
    # nothing for the request, only start-up's own auth.test
    assert {call.method for call in fake_slack.calls()} <= {"auth.test"}


async def test_stale_timestamp_is_401_and_nothing_dispatched(slack_client, surface_runtime):
    status = await post(slack_client, mention("hi"), timestamp=int(time.time()) - 6 * 60)
    assert status == 401
    assert surface_runtime.run_manager.dispatched == []


async def test_tampered_body_is_401(slack_client, surface_runtime):
    body = as_body(mention("hi"))
    headers = signed_headers(body)
    response = await slack_client.post(
        "/slack/events", data=body.replace("hi", "rm -rf"), headers=headers
    )
    assert response.status == 401
    assert surface_runtime.run_manager.dispatched == []


async def test_url_verification_challenge(slack_client):
    body = json.dumps({"token": "t", "challenge": "abc123", "type": "url_verification"})
    response = await slack_client.post("/slack/events", data=body, headers=signed_headers(body))
    assert response.status == 200
    assert (await response.json()) == {"challenge": "abc123"}


async def test_retry_of_the_same_event_is_dispatched_once(slack_client, surface_runtime):
    event = mention("deploy")
    assert await post(slack_client, event) == 200
    assert await post(slack_client, event, retry=1) == 200
    assert await post(slack_client, event, retry=2) == 200
    assert len(surface_runtime.run_manager.dispatched) == 1


async def test_mention_also_delivered_as_message_is_handled_once(slack_client, surface_runtime):
    event = mention("status please")
    copy = message(event["event"]["text"], ts=event["event"]["ts"])
    await post(slack_client, event)
    await post(slack_client, copy)
    assert [m.event_id for m in surface_runtime.run_manager.dispatched] == [event["event_id"]]


async def test_thread_reply_is_passed_on_as_not_addressed(slack_client, surface_runtime):
    await post(slack_client, message("stop, use staging", thread_ts="1700000000.000009"))
    [msg] = surface_runtime.run_manager.dispatched
    assert msg.mentions_bot is False
    assert msg.thread.root == "1700000000.000009"
    assert msg.text == "stop, use staging"


async def test_direct_message_is_addressed_to_the_bot(slack_client, surface_runtime):
    event = message("what is on call?", channel="D0DM", channel_type="im")
    await post(slack_client, event)
    [msg] = surface_runtime.run_manager.dispatched
    assert msg.mentions_bot is True
    assert msg.thread == ThreadRef("slack", TEAM_ID, "D0DM", event["event"]["ts"])


async def test_ignored_messages(slack_client, surface_runtime):
    root = "1700000000.000042"
    ignored = [
        message("top-level chatter, not for the bot"),
        message("bot says", thread_ts=root, bot_id="B0OTHER", subtype="bot_message"),
        message("my own", user=BOT_USER_ID, thread_ts=root, bot_id=BOT_ID),
        message(
            "",
            thread_ts=root,
            subtype="message_changed",
            message={"text": "edited", "user": "U0DEV"},
        ),
        message("", thread_ts=root, subtype="message_deleted"),
        message("joined", thread_ts=root, subtype="channel_join"),
        # Slack re-sends app_mention when a mentioning message is edited: not a new request
        mention("restart web", edited={"user": "U0DEV", "ts": "1700000001.000000"}),
    ]
    for event in ignored:
        assert await post(slack_client, event) == 200
    assert surface_runtime.run_manager.dispatched == []


async def _posted_card(client, fake_slack: FakeSlack) -> dict:
    surface = client.inbound.surface
    thread = ThreadRef("slack", TEAM_ID, CHANNEL, "1700000000.000100")
    view = ApprovalCardView(
        approval_id="ap-1",
        tool_name="ops__restart",
        connector="ops",
        action="restart",
        risk="high",
        requester="U0DEV",
        reason="api is wedged",
        arguments='{"id": "api"}',
        grant_ttl_s=900,
    )
    client.inbound.ports.decisions.view_of = view  # the RecordingBroker behind the port
    ref = await surface.post_approval_card(thread, view)
    return fake_slack.messages[(CHANNEL, ref.message_id)]


async def test_approve_click_decides_as_the_verified_user(
    slack_client, surface_runtime, fake_slack
):
    card = await _posted_card(slack_client, fake_slack)
    assert await post(slack_client, block_actions(card, APPROVE_ACTION, user="U0LEAD")) == 200
    assert surface_runtime.broker.decisions == [("ap-1", "U0LEAD", "approve", "")]
    assert fake_slack.ephemeral == []


async def test_approve_for_thread_asks_whom_it_covers_then_decides(
    slack_client, surface_runtime, fake_slack
):
    card = await _posted_card(slack_client, fake_slack)
    await post(slack_client, block_actions(card, APPROVE_THREAD_ACTION, user="U0LEAD"))
    assert surface_runtime.broker.decisions == []  # nothing decided by opening the dialog
    [opened] = fake_slack.calls("views.open")
    view = opened.args["view"]
    assert view["callback_id"] == "chatops_grant_modal"
    picker = view["blocks"][1]["element"]
    assert picker["type"] == "multi_users_select" and picker["initial_users"] == ["U0DEV"]
    assert "15 min" in view["blocks"][0]["elements"][0]["text"]
    body = grant_submission(view, user="U0LEAD", grantees=["U0DEV", "U0OPS"])
    assert await post(slack_client, body) == 200
    assert surface_runtime.broker.decisions == [("ap-1", "U0LEAD", "approve_thread", "")]
    assert surface_runtime.broker.grantees == [["U0DEV", "U0OPS"]]


async def test_unauthorised_click_gets_an_ephemeral_message(
    slack_client, surface_runtime, fake_slack
):
    surface_runtime.broker.status = "unauthorized"
    surface_runtime.broker.message = "You are not an approver for ops.restart."
    card = await _posted_card(slack_client, fake_slack)
    await post(slack_client, block_actions(card, APPROVE_ACTION, user="U0RANDOM"))
    [note] = fake_slack.ephemeral
    assert note["user"] == "U0RANDOM"
    assert note["channel"] == CHANNEL
    assert note["thread_ts"] == "1700000000.000100"
    assert "not an approver" in note["text"]


async def test_reject_opens_a_modal_and_submission_decides(
    slack_client, surface_runtime, fake_slack
):
    card = await _posted_card(slack_client, fake_slack)
    await post(slack_client, block_actions(card, REJECT_ACTION, user="U0LEAD"))
    assert surface_runtime.broker.decisions == []  # nothing decided by opening the modal
    [opened] = fake_slack.calls("views.open")
    view = opened.args["view"]
    assert view["callback_id"] == "chatops_reject_modal"
    assert view["blocks"][1]["optional"] is True
    assert (
        await post(slack_client, view_submission(view, user="U0LEAD", reason=" wrong env ")) == 200
    )
    assert surface_runtime.broker.decisions == [("ap-1", "U0LEAD", "reject", "wrong env")]


async def test_reject_with_an_empty_reason(slack_client, surface_runtime, fake_slack):
    card = await _posted_card(slack_client, fake_slack)
    await post(slack_client, block_actions(card, REJECT_ACTION, user="U0LEAD"))
    view = fake_slack.calls("views.open")[0].args["view"]
    await post(slack_client, view_submission(view, user="U0LEAD", reason=None))
    assert surface_runtime.broker.decisions == [("ap-1", "U0LEAD", "reject", "")]


async def test_forged_click_is_401_and_decides_nothing(slack_client, surface_runtime, fake_slack):
    card = await _posted_card(slack_client, fake_slack)
    body = block_actions(card, APPROVE_ACTION, user="U0LEAD")
    assert await post(slack_client, body, secret="guessed") == 401
    assert surface_runtime.broker.decisions == []


async def test_a_reply_is_never_dispatched_before_its_mention(slack_client, surface_runtime):
    """Dispatch runs after the ack, but in order per thread: while the mention's dispatch is
    still in progress, the reply in the same thread waits; another thread does not."""
    manager = surface_runtime.run_manager
    manager.gate = asyncio.Event()
    first = mention("restart api")
    root = first["event"]["ts"]
    reply = message("actually, staging", thread_ts=root)
    body, reply_body = as_body(first), as_body(reply)
    for payload in (body, reply_body):
        response = await slack_client.post(
            "/slack/events", data=payload, headers=signed_headers(payload)
        )
        assert response.status == 200  # acked while the dispatch is still blocked
    await asyncio.wait_for(manager.dispatching.wait(), 10)
    await asyncio.sleep(0.1)  # the reply's lane worker would have started by now if it could
    assert manager.started == [first["event_id"]]
    manager.gate.set()
    await slack_client.inbound.wait_idle(10)
    assert [m.event_id for m in manager.dispatched] == [first["event_id"], reply["event_id"]]
