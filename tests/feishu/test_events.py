"""Parsing SDK event objects (pure): message text, mentions, threads, card clicks, dedupe."""

from __future__ import annotations

import json

from lark_oapi.api.im.v1 import P2ImMessageReceiveV1
from lark_oapi.event.callback.model.p2_card_action_trigger import P2CardActionTrigger

from bot.recent_events import RecentEvents
from bot.surfaces.feishu.events import (
    message_text,
    parse_card_action,
    parse_message_event,
    strip_mentions,
)
from tests.fakes.feishu_api import FakeFeishu


def _event(fake: FakeFeishu, text: str = "hi", **kw) -> P2ImMessageReceiveV1:
    return P2ImMessageReceiveV1(fake.message_event(text, **kw))


def test_text_and_post_messages_give_plain_text():
    assert message_text("text", json.dumps({"text": "@_user_1 restart api"})) == (
        "@_user_1 restart api"
    )
    post = {
        "title": "Incident",
        "content": [
            [{"tag": "at", "user_id": "@_user_1"}, {"tag": "text", "text": " restart "}],
            [{"tag": "a", "text": "runbook", "href": "https://x"}, {"tag": "img"}],
        ],
    }
    assert message_text("post", json.dumps(post)) == "Incident\n@_user_1 restart \nrunbook"
    assert message_text("post", json.dumps({"zh_cn": post})).startswith("Incident")
    assert message_text("image", json.dumps({"image_key": "img_x"})) == ""
    assert message_text("text", "not json") == ""


def test_mention_placeholders_are_stripped():
    assert strip_mentions("@_user_1  restart   api @_user_2") == "restart api"
    assert strip_mentions("line one\n@_user_1 line two") == "line one\nline two"


def test_mention_of_another_user_is_not_a_mention_of_the_bot():
    fake = FakeFeishu()
    data = fake.message_event("ask @_user_1", mention_bot=False)
    data["event"]["message"]["mentions"] = [
        {"key": "@_user_1", "name": "Ann", "id": {"open_id": "ou_ann"}, "mentioned_type": "user"}
    ]
    parsed = parse_message_event(P2ImMessageReceiveV1(data), "ou_bot")
    assert parsed.message is None and "not addressed" in parsed.reason


def test_without_the_bot_open_id_a_bot_mention_type_counts():
    fake = FakeFeishu()
    data = fake.message_event("restart", mention_bot=False)
    data["event"]["message"]["mentions"] = [
        {"key": "@_user_1", "name": "chatops", "id": {"open_id": "ou_x"}, "mentioned_type": "bot"}
    ]
    parsed = parse_message_event(P2ImMessageReceiveV1(data), None)
    assert parsed.message is not None and parsed.message.mentions_bot


def test_thread_key_is_tenant_chat_and_root():
    fake = FakeFeishu()
    parsed = parse_message_event(_event(fake, root_id="om_root", chat_id="oc_9"), "ou_bot")
    assert parsed.message is not None
    thread = parsed.message.thread
    assert (thread.platform, thread.workspace, thread.channel, thread.root) == (
        "feishu",
        fake.tenant_key,
        "oc_9",
        "om_root",
    )


def test_bot_messages_and_empty_texts_are_dropped():
    fake = FakeFeishu()
    assert parse_message_event(_event(fake, sender_type="app"), "ou_bot").message is None
    assert parse_message_event(_event(fake, text=""), "ou_bot").message is None


def test_card_click_reads_value_form_and_operator():
    payload = {
        "schema": "2.0",
        "header": {"event_id": "e1", "event_type": "card.action.trigger", "tenant_key": "t1"},
        "event": {
            "operator": {"open_id": "ou_lead", "tenant_key": "t1"},
            "action": {
                "tag": "button",
                "name": "reject_button",
                "value": {"approval_id": "ap_1", "decision": "reject"},
                "form_value": {"reject_reason": "  later  "},
            },
            "context": {"open_message_id": "om_card", "open_chat_id": "oc_1"},
        },
    }
    click = parse_card_action(P2CardActionTrigger(payload))
    assert click is not None
    assert (click.approval_id, click.decision, click.operator_id, click.reason) == (
        "ap_1",
        "reject",
        "ou_lead",
        "later",
    )
    assert click.message_id == "om_card"
    assert (click.chat_id, click.tenant_key, click.external) == ("oc_1", "t1", False)
    payload["event"]["action"]["value"] = {"approval_id": 7, "decision": "approve"}
    assert parse_card_action(P2CardActionTrigger(payload)) is None
    payload["event"]["action"]["value"] = {"approval_id": "ap_1", "decision": "approve"}
    assert parse_card_action(P2CardActionTrigger(payload)).decision == "approve"
    del payload["event"]["action"]["value"]  # a form submit that reports only the name
    payload["event"]["action"]["name"] = "approve_thread__ap_2"
    click = parse_card_action(P2CardActionTrigger(payload))
    assert click is not None and (click.approval_id, click.decision) == ("ap_2", "approve_thread")
    payload["event"]["action"]["name"] = "delete_everything__ap_2"
    assert parse_card_action(P2CardActionTrigger(payload)) is None
    payload["event"]["action"]["name"] = "approve__ap_2"
    payload["event"]["operator"] = {}
    assert parse_card_action(P2CardActionTrigger(payload)) is None


def test_seen_cache_remembers_every_key():
    seen = RecentEvents(ttl_s=60)
    assert seen.add_if_new("event:1", "message:a")
    assert not seen.add_if_new("event:2", "message:a")  # same message, new event id
    assert not seen.add_if_new("event:2", "message:b")  # event 2 was remembered too
    assert seen.add_if_new("event:3", "message:c")


def test_seen_cache_expires_and_stays_bounded():
    expired = RecentEvents(ttl_s=0)
    assert expired.add_if_new("k") and expired.add_if_new("k")
    bounded = RecentEvents(ttl_s=60, max_items=3)
    for i in range(10):
        bounded.add_if_new(f"k{i}")
    assert len(bounded._ids) <= 3
    assert bounded.add_if_new("k0") and not bounded.add_if_new("k9")  # the oldest went
