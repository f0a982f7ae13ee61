"""Webhook mode through the real route and lark-oapi's dispatcher, with encrypted, signed pushes."""

from __future__ import annotations

import json
import time

import pytest

from bot.chat.threads import MessageRef, ThreadRef
from bot.chat.views import ApprovalCardView
from tests.fakes.feishu_api import FakeFeishu
from tests.feishu.conftest import DecisionResult, SurfaceRig


async def post_card(rig: SurfaceRig, fake_feishu: FakeFeishu) -> MessageRef:
    """An approval card in a thread of the fake group chat, posted by the surface."""
    view = ApprovalCardView(approval_id="ap_1", tool_name="ops__restart", connector="ops",
                            action="restart", risk="medium", requester="ou_dev", reason="down",
                            arguments="{}")  # fmt: skip
    root = await rig.surface.sender.create("chat_id", "oc_group", "text", {"text": "root"})
    thread = ThreadRef("feishu", fake_feishu.tenant_key, "oc_group", root)
    return await rig.surface.post_approval_card(thread, view)


async def test_url_verification_challenge_is_answered(rig: SurfaceRig, fake_feishu: FakeFeishu):
    """Feishu sends the challenge encrypted but unsigned (no X-Lark-* headers): answered."""
    challenge = fake_feishu.url_verification()
    body_sent, headers = fake_feishu.signed(challenge)
    assert "X-Lark-Signature" not in headers and b'"encrypt"' in body_sent
    status, body = await fake_feishu.push(rig.url, challenge)
    assert status == 200 and body == {"challenge": challenge["challenge"]}


async def test_unsigned_event_is_rejected_even_though_challenges_come_unsigned(
    rig: SurfaceRig, fake_feishu: FakeFeishu
):
    import aiohttp

    for payload in (fake_feishu.message_event("restart api"), fake_feishu.message_event("x")):
        body, headers = fake_feishu.signed(payload)
        for name in ("X-Lark-Signature", "X-Lark-Request-Timestamp", "X-Lark-Request-Nonce"):
            del headers[name]
        async with aiohttp.ClientSession() as s, s.post(rig.url, data=body, headers=headers) as r:
            assert r.status == 401
    assert rig.run_manager.messages == []


async def test_url_verification_with_wrong_token_is_rejected(
    rig: SurfaceRig, fake_feishu: FakeFeishu
):
    challenge = fake_feishu.url_verification() | {"token": "wrong"}
    status, body = await fake_feishu.push(rig.url, challenge)
    assert status == 401 and "challenge" not in body


async def test_group_mention_is_dispatched_with_placeholder_stripped(
    rig: SurfaceRig, fake_feishu: FakeFeishu
):
    event = fake_feishu.message_event("restart  api please", user="ou_dev")
    status, body = await fake_feishu.push(rig.url, event)
    assert status == 200 and body == {"msg": "success"}
    await rig.run_manager.wait_for(lambda: len(rig.run_manager.messages) == 1)
    msg = rig.run_manager.messages[0]
    message_id = event["event"]["message"]["message_id"]
    assert msg.text == "restart api please"
    assert msg.user_id == "ou_dev" and msg.mentions_bot is True
    assert (msg.thread.platform, msg.thread.workspace) == ("feishu", fake_feishu.tenant_key)
    assert (msg.thread.channel, msg.thread.root) == ("oc_group", message_id)
    assert msg.event_id == event["header"]["event_id"] and msg.message_id == message_id
    # the surface learnt the bot's open_id from bot/v3/info with the SDK-managed tenant token
    assert rig.surface.bot_open_id == fake_feishu.bot_open_id
    assert fake_feishu.calls("token") and fake_feishu.calls("bot.info")


async def test_thread_reply_without_mention_is_passed_on_as_not_addressed(
    rig: SurfaceRig, fake_feishu: FakeFeishu
):
    event = fake_feishu.message_event("also check db", mention_bot=False, root_id="om_root")
    status, _ = await fake_feishu.push(rig.url, event)
    assert status == 200
    await rig.run_manager.wait_for(lambda: len(rig.run_manager.messages) == 1)
    msg = rig.run_manager.messages[0]
    assert msg.thread.root == "om_root" and msg.mentions_bot is False
    assert msg.text == "also check db"


async def test_direct_message_starts_a_conversation(rig: SurfaceRig, fake_feishu: FakeFeishu):
    event = fake_feishu.message_event("hello", mention_bot=False, chat_type="p2p", chat_id="oc_dm")
    await fake_feishu.push(rig.url, event)
    await rig.run_manager.wait_for(lambda: len(rig.run_manager.messages) == 1)
    assert rig.run_manager.messages[0].mentions_bot is True


async def test_ignored_messages_are_acknowledged_but_not_dispatched(
    rig: SurfaceRig, fake_feishu: FakeFeishu
):
    chatter = fake_feishu.message_event("lunch?", mention_bot=False)  # group, no thread
    own = fake_feishu.message_event("status card", sender_type="app")
    for event in (chatter, own):
        status, _ = await fake_feishu.push(rig.url, event)
        assert status == 200
    # a later addressed message is the first thing dispatched
    await fake_feishu.push(rig.url, fake_feishu.message_event("real one"))
    await rig.run_manager.wait_for(lambda: len(rig.run_manager.messages) >= 1)
    assert [m.text for m in rig.run_manager.messages] == ["real one"]


async def test_duplicate_event_and_message_ids_are_ignored(
    rig: SurfaceRig, fake_feishu: FakeFeishu
):
    event = fake_feishu.message_event("restart api", message_id="om_same", event_id="ev_1")
    again = fake_feishu.message_event("restart api", message_id="om_same", event_id="ev_2")
    for payload in (event, event, again):
        status, _ = await fake_feishu.push(rig.url, payload)
        assert status == 200
    await fake_feishu.push(rig.url, fake_feishu.message_event("next"))
    await rig.run_manager.wait_for(lambda: len(rig.run_manager.messages) >= 2)
    assert sorted(m.text for m in rig.run_manager.messages) == ["next", "restart api"]


async def test_bad_signature_is_rejected_and_nothing_runs(rig: SurfaceRig, fake_feishu: FakeFeishu):
    event = fake_feishu.message_event("restart api")
    status, _ = await fake_feishu.push(rig.url, event, headers={"X-Lark-Signature": "0" * 64})
    assert status == 401
    status, _ = await fake_feishu.push(
        rig.url,
        event,
        headers={"X-Lark-Request-Timestamp": "1"},  # signed over another ts
    )
    assert status == 401
    assert rig.run_manager.messages == []


async def test_wrong_encrypt_key_is_rejected(rig: SurfaceRig, fake_feishu: FakeFeishu):
    status, _ = await fake_feishu.push(rig.url, fake_feishu.message_event("x"), key="other-key")
    assert status == 401
    assert rig.run_manager.messages == []


async def test_signature_is_checked_before_the_body_is_decrypted(
    rig: SurfaceRig, fake_feishu: FakeFeishu
):
    """lark-oapi decrypts before it checks the signature, so a body that decrypts to garbage
    (as one in 256 bodies under another key do) failed with a Unicode error (500), not 401."""
    import base64
    import hashlib
    import os
    import time

    import aiohttp
    from Crypto.Cipher import AES

    from tests.fakes.feishu_events import signature

    key = hashlib.sha256(fake_feishu.encrypt_key.encode()).digest()
    garbage = b"\xff" * 15 + b"\x01"  # valid PKCS#7 padding, not UTF-8
    iv = os.urandom(16)
    body = json.dumps(
        {"encrypt": base64.b64encode(iv + AES.new(key, AES.MODE_CBC, iv).encrypt(garbage)).decode()}
    ).encode()
    ts, nonce = str(int(time.time())), "n0nce"
    headers = {
        "Content-Type": "application/json",
        "X-Lark-Request-Timestamp": ts,
        "X-Lark-Request-Nonce": nonce,
        "X-Lark-Signature": signature(ts, nonce, "another-key", body),
    }
    async with aiohttp.ClientSession() as s, s.post(rig.url, data=body, headers=headers) as r:
        assert r.status == 401
    assert rig.run_manager.messages == []


async def test_missing_signature_headers_are_rejected(rig: SurfaceRig, fake_feishu: FakeFeishu):
    body, headers = fake_feishu.signed(fake_feishu.message_event("x"))
    del headers["X-Lark-Signature"]
    import aiohttp

    async with aiohttp.ClientSession() as s, s.post(rig.url, data=body, headers=headers) as r:
        assert r.status == 401
    assert rig.run_manager.messages == []


async def test_bad_verification_token_inside_a_signed_body_is_rejected(
    rig: SurfaceRig, fake_feishu: FakeFeishu
):
    event = fake_feishu.message_event("restart api")
    event["header"]["token"] = "forged"
    status, _ = await fake_feishu.push(rig.url, event)
    assert status == 401
    assert rig.run_manager.messages == []


async def test_card_click_decides_for_the_verified_operator(
    rig: SurfaceRig, fake_feishu: FakeFeishu
):
    view = ApprovalCardView(
        approval_id="ap_9",
        tool_name="ops__restart",
        connector="ops",
        action="restart",
        risk="medium",
        requester="ou_dev",
        reason="down",
        arguments="{}",
    )
    from bot.chat.threads import ThreadRef

    root = await rig.surface.sender.create("chat_id", "oc_group", "text", {"text": "root"})
    ref = await rig.surface.post_approval_card(
        ThreadRef("feishu", fake_feishu.tenant_key, "oc_group", root), view
    )
    decided = ApprovalCardView(
        **{
            **view.__dict__,
            "state": "rejected",
            "decided_by": ("ou_lead",),
            "decision_reason": "peak hours",
        }
    )
    rig.broker.result = DecisionResult("decided", "Rejected. The agent will be told why.", decided)
    click = fake_feishu.card_action(ref.message_id, "reject", user="ou_lead", reason=" peak hours ")
    status, body = await fake_feishu.push(rig.url, click)
    assert status == 200
    assert rig.broker.calls == [("ap_9", "ou_lead", "reject", "peak hours")]
    assert body["toast"] == {"type": "success", "content": "Rejected. The agent will be told why."}
    assert body["card"]["type"] == "raw"
    assert body["card"]["data"]["header"]["template"] == "red"
    assert "peak hours" in json.dumps(body["card"]["data"])


async def test_unauthorised_click_gets_an_error_toast_and_no_card(
    rig: SurfaceRig, fake_feishu: FakeFeishu
):
    from bot.chat.threads import ThreadRef

    view = ApprovalCardView(
        approval_id="ap_1",
        tool_name="t",
        connector="c",
        action="a",
        risk="low",
        requester="ou_dev",
        reason="",
        arguments="{}",
    )
    root = await rig.surface.sender.create("chat_id", "oc_group", "text", {"text": "root"})
    ref = await rig.surface.post_approval_card(
        ThreadRef("feishu", fake_feishu.tenant_key, "oc_group", root), view
    )
    rig.broker.result = DecisionResult("unauthorized", "You are not one of the approvers.")
    status, body = await fake_feishu.push(
        rig.url, fake_feishu.card_action(ref.message_id, "approve", user="ou_intruder")
    )
    assert status == 200
    assert body == {"toast": {"type": "error", "content": "You are not one of the approvers."}}
    assert rig.broker.calls == [("ap_1", "ou_intruder", "approve", "")]


async def test_card_click_with_forged_value_is_refused_without_deciding(
    rig: SurfaceRig, fake_feishu: FakeFeishu
):
    from bot.chat.threads import ThreadRef

    view = ApprovalCardView(
        approval_id="ap_1",
        tool_name="t",
        connector="c",
        action="a",
        risk="low",
        requester="ou_dev",
        reason="",
        arguments="{}",
    )
    root = await rig.surface.sender.create("chat_id", "oc_group", "text", {"text": "root"})
    ref = await rig.surface.post_approval_card(
        ThreadRef("feishu", fake_feishu.tenant_key, "oc_group", root), view
    )
    click = fake_feishu.card_action(ref.message_id, "approve", user="ou_lead")
    click["event"]["action"]["value"]["decision"] = "approve_everything"
    status, body = await fake_feishu.push(rig.url, click)
    assert status == 200 and body["toast"]["type"] == "error"
    assert rig.broker.calls == []


async def test_unparseable_body_is_a_bad_request(rig: SurfaceRig, fake_feishu: FakeFeishu):
    import aiohttp

    from tests.fakes.feishu_events import signature

    body = b"<xml/>"
    now = str(int(time.time()))
    headers = {
        "X-Lark-Request-Timestamp": now,
        "X-Lark-Request-Nonce": "n",
        "X-Lark-Signature": signature(now, "n", fake_feishu.encrypt_key, body),
    }
    async with aiohttp.ClientSession() as s:
        async with s.post(rig.url, data=body, headers=headers) as r:
            assert r.status == 400
        async with s.post(rig.url, data=body) as r:  # unsigned: refused before reading
            assert r.status == 401
    assert rig.run_manager.messages == []


async def test_verified_event_of_an_unhandled_type_is_acknowledged(
    rig: SurfaceRig, fake_feishu: FakeFeishu
):
    event = {
        "schema": "2.0",
        "header": fake_feishu._header("im.chat.member.bot.added_v1", None),
        "event": {"chat_id": "oc_group"},
    }
    status, body = await fake_feishu.push(rig.url, event)
    assert status == 200 and body == {"msg": "ignored"}
    # unverified, the same event is still refused
    status, _ = await fake_feishu.push(rig.url, event, key="another-key")
    assert status == 401


async def test_without_an_encrypt_key_the_webhook_refuses_everything(
    fake_feishu: FakeFeishu, aiohttp_server, inbox_db
):
    """A surface mounted without FEISHU_ENCRYPT_KEY (setup_feishu refuses to start so) fails
    closed: a plain event carrying the right verification token is still refused."""
    from aiohttp import web

    from tests.feishu.conftest import RecordingRunManager, ScriptedBroker, recording_surface
    from tests.feishu.conftest import feishu_settings as settings_for

    settings = settings_for(fake_feishu, feishu_encrypt_key=None)
    run_manager, broker = RecordingRunManager(), ScriptedBroker()
    surface = recording_surface(settings, run_manager, broker, inbox_db)
    app = web.Application()
    app.router.add_post("/feishu/events", surface.handle_webhook)
    app.cleanup_ctx.append(surface.lifecycle)
    url = str((await aiohttp_server(app)).make_url("/feishu/events"))

    status, body = await fake_feishu.push(url, fake_feishu.message_event("plain"), encrypted=False)
    assert status == 401 and "FEISHU_ENCRYPT_KEY" in body["msg"]
    assert run_manager.messages == [] and broker.calls == []


@pytest.mark.parametrize("age_s", [301, 3600, -301])
async def test_a_replayed_request_older_than_five_minutes_is_refused(
    rig: SurfaceRig, fake_feishu: FakeFeishu, age_s: int
):
    """A captured, validly signed event or click sent again later: refused, nothing runs."""
    sent_at = time.time() - age_s
    event = fake_feishu.message_event("restart api")
    status, body = await fake_feishu.push(rig.url, event, sent_at=sent_at)
    assert status == 401 and "too old" in body["msg"]
    ref = await post_card(rig, fake_feishu)
    click = fake_feishu.card_action(ref.message_id, "approve", user="ou_lead")
    status, _ = await fake_feishu.push(rig.url, click, sent_at=sent_at)
    assert status == 401
    assert rig.run_manager.messages == [] and rig.broker.calls == []
    status, _ = await fake_feishu.push(rig.url, event, sent_at=time.time() - 200)
    assert status == 200  # within the window (and Feishu's clock may differ a little)
    await rig.run_manager.wait_for(lambda: len(rig.run_manager.messages) == 1)
