"""The sender on the real lark-oapi client against FakeFeishu: token, reply, patch, throttling."""

from __future__ import annotations

import asyncio
import json

import pytest

from bot.chat.threads import ThreadRef
from bot.chat.views import ApprovalCardView, StatusStep, StatusView
from bot.surfaces.feishu.send import FeishuAPIError, message_rate_limiter
from bot.surfaces.feishu.surface import FeishuSurface, build_sender
from tests.fakes.feishu_api import FakeFeishu
from tests.feishu.conftest import (
    RecordingRunManager,
    ScriptedBroker,
    SurfaceRig,
    feishu_settings,
    recording_surface,
)


@pytest.fixture
def surface(fake_feishu: FakeFeishu, inbox_db) -> FeishuSurface:
    settings = feishu_settings(fake_feishu)
    return recording_surface(settings, RecordingRunManager(), ScriptedBroker(), inbox_db)


def thread_of(fake: FakeFeishu) -> ThreadRef:
    event = fake.message_event("hi")  # registers the user's message on the fake platform
    root = event["event"]["message"]["message_id"]
    return ThreadRef("feishu", fake.tenant_key, "oc_group", root)


async def test_status_card_replied_in_thread_then_patched_in_place(
    surface: FeishuSurface, fake_feishu: FakeFeishu
):
    thread = thread_of(fake_feishu)
    ref = await surface.post_status(thread, StatusView(state="running", headline="Working"))
    done = StatusView(state="done", steps=(StatusStep("ops__status", "done", 0.4),))
    await surface.update_status(ref, done)
    [token] = fake_feishu.calls("token")
    assert token.body == {"app_id": fake_feishu.app_id, "app_secret": fake_feishu.app_secret}
    [reply] = fake_feishu.calls("message.reply")
    assert reply.path == f"/open-apis/im/v1/messages/{thread.root}/reply"
    assert reply.body["msg_type"] == "interactive" and reply.body["reply_in_thread"] is True
    assert reply.body["uuid"]  # idempotency key
    [patch] = fake_feishu.calls("message.patch")
    assert patch.path == f"/open-apis/im/v1/messages/{ref.message_id}"
    message = fake_feishu.messages[ref.message_id]
    assert message.root_id == thread.root and len(message.contents) == 2
    assert message.content["header"]["title"]["content"] == "Done"


async def test_answer_is_split_into_cards_in_the_thread(
    surface: FeishuSurface, fake_feishu: FakeFeishu
):
    thread = thread_of(fake_feishu)
    markdown = "\n\n".join(f"Paragraph {i}: " + "漢字" * 400 for i in range(40))
    ref = await surface.post_answer(thread, markdown)
    cards = fake_feishu.cards_in(thread.root)
    assert len(cards) > 1 and ref.message_id == fake_feishu.replies_to(thread.root)[0].message_id
    text = "".join(c["body"]["elements"][0]["content"] for c in cards)
    assert "Paragraph 0" in text and "Paragraph 39" in text


async def test_notice_mentions_and_private_note_is_an_ephemeral_card_in_the_group(
    surface: FeishuSurface, fake_feishu: FakeFeishu
):
    thread = thread_of(fake_feishu)  # ou_user wrote in oc_group
    await surface.post_notice(thread, "Approval still waiting", mention=["ou_lead"])
    [notice] = fake_feishu.replies_to(thread.root)
    assert notice.msg_type == "text"
    assert notice.content == {"text": '<at user_id="ou_lead"></at> Approval still waiting'}
    await surface.notify_user(thread, "ou_user", "You may not see audit reports.")
    [sent] = fake_feishu.calls("ephemeral.send")
    assert sent.body["chat_id"] == "oc_group" and sent.body["open_id"] == "ou_user"
    assert sent.body["msg_type"] == "interactive"
    [note] = fake_feishu.ephemeral_to("ou_user")
    assert "You may not see audit reports." in json.dumps(note.card)
    assert fake_feishu.calls("message.create") == []  # nothing public, no DM
    assert [m.message_id for m in fake_feishu.replies_to(thread.root)] == [notice.message_id]


async def test_private_note_refused_as_ephemeral_goes_as_a_direct_card(
    surface: FeishuSurface, fake_feishu: FakeFeishu
):
    """Feishu refuses an ephemeral card for someone not in the chat (a clicker on a card copy,
    a topic group): the note still reaches that person alone, as a direct message."""
    thread = thread_of(fake_feishu)
    await surface.notify_user(thread, "ou_outsider", "You may not approve this.")
    [refused] = fake_feishu.calls("ephemeral.send")
    assert refused.code != 0 and fake_feishu.ephemeral == []
    [dm] = fake_feishu.calls("message.create")
    assert dm.query == {"receive_id_type": "open_id"}
    assert dm.body["receive_id"] == "ou_outsider" and dm.body["msg_type"] == "interactive"
    assert "You may not approve this." in dm.body["content"]
    assert len(fake_feishu.replies_to(thread.root)) == 0  # nothing in the thread


async def test_private_note_in_a_direct_chat_is_a_card_to_that_chat(
    rig: SurfaceRig, fake_feishu: FakeFeishu
):
    """A p2p chat the surface saw a message in is private already: a plain card to it."""
    event = fake_feishu.message_event("hi", user="ou_dev", chat_id="oc_dm", chat_type="p2p")
    status, _ = await fake_feishu.push(rig.url, event)
    assert status == 200
    await rig.run_manager.wait_for(lambda: len(rig.run_manager.messages) == 1)
    [message] = rig.run_manager.messages
    await rig.surface.notify_user(message.thread, "ou_dev", "Connect your account.")
    assert fake_feishu.calls("ephemeral.send") == []
    [card] = fake_feishu.calls("message.create")
    assert card.query == {"receive_id_type": "chat_id"} and card.body["receive_id"] == "oc_dm"
    assert (
        card.body["msg_type"] == "interactive" and "Connect your account." in card.body["content"]
    )


async def test_approval_card_update_by_patch(surface: FeishuSurface, fake_feishu: FakeFeishu):
    thread = thread_of(fake_feishu)
    view = ApprovalCardView(
        approval_id="ap_1",
        tool_name="ops__restart",
        connector="ops",
        action="restart",
        risk="medium",
        requester="ou_dev",
        reason="",
        arguments="{}",
    )
    ref = await surface.post_approval_card(thread, view)
    await surface.update_approval_card(
        ref, ApprovalCardView(**{**view.__dict__, "state": "expired"})
    )
    card = fake_feishu.messages[ref.message_id].content
    assert card["header"]["template"] == "grey" and "Expired" in card["header"]["title"]["content"]


async def test_throttling_is_retried_with_backoff(surface: FeishuSurface, fake_feishu: FakeFeishu):
    thread = thread_of(fake_feishu)
    fake_feishu.fail_next("message.reply", status=429, count=2)  # no reset header: backoff
    fake_feishu.fail_next("message.reply", status=200, code=230020, msg="frequency limit")
    ref = await surface.post_notice(thread, "hello")
    calls = fake_feishu.calls("message.reply")
    assert [(c.status, c.code) for c in calls] == [(429, 99991400)] * 2 + [(200, 230020), (200, 0)]
    assert fake_feishu.messages[ref.message_id].content == {"text": "hello"}
    # every attempt of one logical send carries the same idempotency key
    assert len({c.body["uuid"] for c in calls}) == 1


async def test_persistent_throttling_and_other_errors_raise(
    surface: FeishuSurface, fake_feishu: FakeFeishu
):
    thread = thread_of(fake_feishu)
    fake_feishu.fail_next("message.reply", status=429, count=5)
    with pytest.raises(FeishuAPIError) as err:
        await surface.post_notice(thread, "hello")
    assert err.value.code == 99991400 and err.value.status == 429
    with pytest.raises(FeishuAPIError) as err:
        await surface.update_status(surface_ref(thread, "om_missing"), StatusView(state="done"))
    assert err.value.code == 230011


def surface_ref(thread: ThreadRef, message_id: str):
    from bot.chat.threads import MessageRef

    return MessageRef(thread, message_id)


async def test_wrong_app_secret_fails_without_leaking_it(fake_feishu: FakeFeishu):
    settings = feishu_settings(fake_feishu, feishu_app_secret="wrong-secret-value")
    sender = build_sender(settings)
    try:
        with pytest.raises(FeishuAPIError) as err:
            await sender.patch("om_x", {"schema": "2.0"})
    finally:
        sender.close()
    assert "wrong-secret-value" not in str(err.value)
    assert fake_feishu.calls("message.patch") == []


async def test_rate_limiter_spaces_calls_on_one_message_at_five_a_second():
    limiter = message_rate_limiter(5.0)
    loop = asyncio.get_running_loop()
    start = loop.time()
    landed: dict[str, list[float]] = {"om_a": [], "om_b": []}

    async def call(message_id: str) -> None:
        await limiter.acquire(message_id)
        landed[message_id].append(loop.time() - start)

    await asyncio.gather(*(call("om_a") for _ in range(4)), call("om_b"))
    a = landed["om_a"]
    assert all(later - earlier >= 0.199 for earlier, later in zip(a, a[1:], strict=False))
    assert landed["om_b"][0] < a[1]  # another message has its own budget: it did not queue


async def test_scheduled_audit_report_is_a_card_in_the_chat(
    surface: FeishuSurface, fake_feishu: FakeFeishu, tmp_path
):
    from bot.audit.report import AuditQuery, build_report
    from bot.clock import utcnow
    from bot.storage.database import open_database

    engine = open_database(f"sqlite:///{tmp_path / 'audit.db'}")
    try:
        report = build_report(engine, AuditQuery.window("7d", now=utcnow()))
    finally:
        engine.dispose()
    ref = await surface.post_audit_report("oc_ops", report)
    [call] = fake_feishu.calls("message.create")
    assert call.query == {"receive_id_type": "chat_id"} and call.body["receive_id"] == "oc_ops"
    card = fake_feishu.messages[ref.message_id].content
    assert card["header"]["title"]["content"] == "Audit report"
    assert (ref.thread.channel, ref.thread.root) == ("oc_ops", ref.message_id)


async def test_a_rejected_tenant_token_is_renewed_once(
    surface: FeishuSurface, fake_feishu: FakeFeishu
):
    thread = thread_of(fake_feishu)
    await surface.post_notice(thread, "first")
    fake_feishu.tokens.clear()  # Feishu revokes the token the SDK cached
    await surface.post_notice(thread, "second")
    assert len(fake_feishu.calls("token")) == 2
    assert [c.code for c in fake_feishu.calls("message.reply")] == [0, 99991663, 0]
    fake_feishu.fail_next("message.reply", status=400, code=99991663, count=2)
    with pytest.raises(FeishuAPIError) as err:  # rejected again after renewal: give up
        await surface.post_notice(thread, "third")
    assert err.value.code == 99991663
