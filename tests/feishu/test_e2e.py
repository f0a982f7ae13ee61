"""Feishu end to end through `bot.server.create_app`: encrypted, signed pushes in, FakeFeishu
calls out. The runtime, engine, approval broker and connector are real; the model is
FakeOpenAI and the ops system a local fake API. Every test runs on SQLite and PostgreSQL."""

from __future__ import annotations

import json

import pytest

from bot.server import create_app
from tests.fakes.feishu_api import FakeFeishu
from tests.fakes.openai_server import FakeOpenAI, answer
from tests.feishu.e2e import (
    DEV,
    LEAD,
    FeishuBot,
    OpsAPI,
    approval_message,
    bot_settings,
    has_form,
    manifest,
    markdown_of,
    plain_text_of,
    restart_then_answer,
    status_message,
    title,
    wait_card,
)


@pytest.fixture
def settings(tmp_path, database_url, ops_api, fake_feishu, fake_openai):
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    (manifests / "ops.yaml").write_text(manifest(ops_api.url))
    return bot_settings(
        database_url=database_url,
        manifests=manifests,
        fake=fake_feishu,
        llm_url=fake_openai.base_url,
    )


@pytest.fixture
async def bot(aiohttp_client, settings, fake_feishu) -> FeishuBot:
    return FeishuBot(await aiohttp_client(create_app(settings)), fake_feishu)


async def test_mention_status_card_approve_answer(
    bot: FeishuBot, fake_feishu: FakeFeishu, fake_openai: FakeOpenAI, ops_api: OpsAPI
):
    fake_openai.respond_with(restart_then_answer)
    event = fake_feishu.message_event("please restart the api", user=DEV)
    root = event["event"]["message"]["message_id"]
    status, body = await bot.send(event)
    assert (status, body) == (200, {"msg": "success"})

    card = await wait_card(fake_feishu, root, pending=True)
    first = fake_feishu.calls("message.reply")[0]
    assert first.path == f"/open-apis/im/v1/messages/{root}/reply"  # the status card came first
    assert first.body["msg_type"] == "interactive" and first.body["reply_in_thread"] is True
    assert json.loads(first.body["content"])["config"]["update_multi"] is True
    assert card.content["header"]["template"] == "red"  # risk: high
    text = json.dumps(card.content, ensure_ascii=False)
    for expected in ("ops__restart", "<at id=ou_dev></at>", "<at id=ou_lead></at>", '\\"api\\"'):
        assert expected in text
    assert ops_api.restarts == []

    status, body = await bot.click(card, "approve", user=LEAD)
    assert status == 200
    assert body["toast"]["type"] == "success"
    assert body["card"]["type"] == "raw" and title(body["card"]["data"]).startswith("Approved")
    await bot.wait_idle()
    assert ops_api.restarts == ["api"]

    decided = approval_message(fake_feishu, root)
    assert decided is not None and not has_form(decided.content)  # PATCHed in place
    assert "**Approved** by <at id=ou_lead></at>" in markdown_of(decided.content)
    assert decided.content["header"]["template"] == "green"
    status_card = status_message(fake_feishu, root)
    assert len(status_card.contents) > 1 and title(status_card.content) == "Done"
    assert status_card.content["header"]["template"] == "green"
    answer_card = fake_feishu.replies_to(root)[-1]
    assert "## Restarted" in markdown_of(answer_card.content)
    assert "[the runbook](https://runbooks.example/api)" in markdown_of(answer_card.content)
    patched = {c.path.rsplit("/", 1)[-1] for c in fake_feishu.calls("message.patch")}
    assert patched == {status_card.message_id, decided.message_id}
    # the tenant token came from the fake through the SDK and was used on every call
    assert all(
        c.headers["Authorization"].startswith("Bearer t-")
        for c in fake_feishu.requests
        if c.op.startswith("message.")
    )


async def test_reject_with_a_reason(
    bot: FeishuBot, fake_feishu: FakeFeishu, fake_openai: FakeOpenAI, ops_api: OpsAPI
):
    fake_openai.respond_with(restart_then_answer)
    root, card = await bot.request_restart()

    status, body = await bot.click(card, "reject", user=LEAD, reason="not during the release")
    assert status == 200 and body["toast"]["type"] == "success"
    await bot.wait_idle()
    assert ops_api.restarts == []
    decided = approval_message(fake_feishu, root)
    assert decided is not None and not has_form(decided.content)
    assert decided.content["header"]["template"] == "red"
    text = markdown_of(decided.content) + "\n" + plain_text_of(decided.content)
    assert "**Rejected** by <at id=ou_lead></at>" in text and "not during the release" in text
    tool_results = [
        m for body in fake_openai.requests for m in body["messages"] if m["role"] == "tool"
    ]
    assert any("not during the release" in str(m["content"]) for m in tool_results)


async def test_unauthorised_operator_gets_an_error_toast_and_nothing_changes(
    bot: FeishuBot, fake_feishu: FakeFeishu, fake_openai: FakeOpenAI, ops_api: OpsAPI
):
    fake_openai.respond_with(restart_then_answer)
    root, card = await bot.request_restart()
    versions = len(card.contents)

    for intruder in ("ou_random", DEV):  # DEV requested it but is not an approver
        status, body = await bot.click(card, "approve", user=intruder)
        assert status == 200
        assert body["toast"]["type"] == "error" and "card" not in body
    assert ops_api.restarts == []
    assert len(card.contents) == versions and has_form(card.content)

    status, body = await bot.click(card, "approve", user=LEAD)  # the real approver still can
    assert body["toast"]["type"] == "success"
    await bot.wait_idle()
    assert ops_api.restarts == ["api"]

    status, body = await bot.click(card, "reject", user=LEAD)  # later clicks: already decided
    assert body["toast"]["type"] == "info"


async def test_duplicate_event_starts_one_run(
    bot: FeishuBot, fake_feishu: FakeFeishu, fake_openai: FakeOpenAI
):
    fake_openai.respond_with(
        lambda body: answer("All quiet.") if body.get("stream") else answer("nothing to do")
    )
    event = fake_feishu.message_event("how are things?", user=DEV)
    root = event["event"]["message"]["message_id"]
    same_message = fake_feishu.message_event("how are things?", user=DEV, message_id=root)
    for payload in (event, event, same_message):
        status, _ = await bot.send(payload)
        assert status == 200
    await bot.wait_idle()
    replies = fake_feishu.replies_to(root)
    assert len(replies) == 2  # one status card, one answer
    assert "All quiet." in markdown_of(replies[1].content)
    assert len([b for b in fake_openai.requests if not b.get("stream")]) == 1


async def test_bad_token_or_signature_is_rejected_and_nothing_runs(
    bot: FeishuBot, fake_feishu: FakeFeishu, fake_openai: FakeOpenAI
):
    event = fake_feishu.message_event("restart api", user=DEV)
    status, _ = await bot.send(event, headers={"X-Lark-Signature": "f" * 64})
    assert status == 401
    status, _ = await bot.send(event, key="not-the-key")
    assert status == 401
    forged = fake_feishu.message_event("restart api", user=DEV)
    forged["header"]["token"] = "forged-token"
    status, _ = await bot.send(forged)
    assert status == 401
    assert fake_feishu.calls("message.reply") == []
    assert fake_openai.requests == []


async def test_throttled_edits_are_retried_and_the_final_state_shows(
    bot: FeishuBot, fake_feishu: FakeFeishu, fake_openai: FakeOpenAI, ops_api: OpsAPI
):
    fake_openai.respond_with(restart_then_answer)
    root, card = await bot.request_restart()
    reset = {"x-ogw-ratelimit-reset": "0"}
    fake_feishu.fail_next("message.patch", status=429, headers=reset, count=2)
    fake_feishu.fail_next("message.patch", status=200, code=99991400, headers=reset)
    await bot.click(card, "approve", user=LEAD)
    await bot.wait_idle()
    # the edits land after their retries: wait for what the thread shows
    await wait_card(fake_feishu, root, pending=False)
    await fake_feishu.wait_for(lambda f: title(status_message(f, root).content) == "Done", 15)
    statuses = [(c.status, c.code) for c in fake_feishu.calls("message.patch")]
    assert statuses.count((429, 99991400)) == 2 and statuses.count((200, 99991400)) == 1
    assert ops_api.restarts == ["api"]


async def test_thread_reply_during_a_run_is_an_interrupt(
    bot: FeishuBot, fake_feishu: FakeFeishu, fake_openai: FakeOpenAI, ops_api: OpsAPI
):
    fake_openai.respond_with(restart_then_answer)
    root, card = await bot.request_restart()
    reply = fake_feishu.message_event(
        "also check the db", user=DEV, mention_bot=False, root_id=root
    )
    status, _ = await bot.send(reply)
    assert status == 200
    await bot.click(card, "approve", user=LEAD)
    await bot.wait_idle()
    prompts = json.dumps([b["messages"] for b in fake_openai.requests])
    assert "also check the db" in prompts
    assert len([r for r in fake_feishu.replies_to(root) if title(r.content) == "Done"]) == 1


@pytest.fixture
def short_timeout_settings(tmp_path, ops_api, fake_feishu, fake_openai):
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    (manifests / "ops.yaml").write_text(manifest(ops_api.url))
    return bot_settings(
        database_url=f"sqlite:///{tmp_path / 'chatops.db'}",
        manifests=manifests,
        fake=fake_feishu,
        llm_url=fake_openai.base_url,
        chatops_approval_timeout_s=1.5,
        chatops_approval_escalate_after_s=0.3,
    )


async def test_unanswered_approval_is_escalated_then_expires_and_the_card_says_so(
    aiohttp_client,
    short_timeout_settings,
    fake_feishu: FakeFeishu,
    fake_openai: FakeOpenAI,
    ops_api: OpsAPI,
):
    bot = FeishuBot(await aiohttp_client(create_app(short_timeout_settings)), fake_feishu)
    fake_openai.respond_with(restart_then_answer)
    root, card = await bot.request_restart()

    reminder = await fake_feishu.wait_for(
        lambda f: next((m for m in f.replies_to(root) if m.msg_type == "text"), None), 15
    )
    assert reminder.content["text"].startswith('<at user_id="ou_lead"></at> Still waiting')
    expired = await wait_card(fake_feishu, root, pending=False)
    assert expired.message_id == card.message_id  # the same card, PATCHed
    assert expired.content["header"]["template"] == "grey"
    assert title(expired.content).startswith("Expired")
    await bot.wait_idle()
    assert ops_api.restarts == []
    status, body = await bot.click(card, "approve", user=LEAD)  # too late
    assert status == 200 and body["toast"]["type"] == "info"
