"""Slack end to end through `bot.server.create_app`: signed requests in, FakeSlack calls out.

The runtime, the engine, the approval broker and the connector are all real; the model is
FakeOpenAI, the Slack Web API is FakeSlack, the ops system is a local fake API. Every test runs
on SQLite and PostgreSQL (the `database_url` fixture).
"""

from __future__ import annotations

import json
import logging
import time

import pytest

from bot.server import create_app
from bot.surfaces.slack.cards import APPROVE_ACTION, REJECT_ACTION
from tests.fakes.openai_server import FakeOpenAI, answer
from tests.fakes.slack_api import BOT_TOKEN, FakeSlack
from tests.slack.e2e import (
    OpsAPI,
    SlackBot,
    card_in,
    has_buttons,
    ops_settings,
    restart_then_answer,
    texts,
    wait_card,
)
from tests.slack.payloads import CHANNEL, SIGNING_SECRET, mention, message


@pytest.fixture
def settings(tmp_path, database_url, ops_api, fake_slack, fake_openai):
    return ops_settings(
        tmp_path, database_url=database_url, ops_api=ops_api, slack=fake_slack,
        llm_url=fake_openai.base_url,
    )  # fmt: skip


@pytest.fixture
async def bot(aiohttp_client, settings, fake_slack) -> SlackBot:
    return SlackBot(await aiohttp_client(create_app(settings)), fake_slack)


async def test_mention_status_card_approve_answer(
    bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, ops_api: OpsAPI
):
    fake_openai.respond_with(restart_then_answer)
    event = mention("please restart the api", user="U0DEV")
    root = event["event"]["ts"]
    assert await bot.send(event) == 200

    card = await wait_card(fake_slack, root, pending=True)
    first = fake_slack.calls("chat.postMessage")[0]
    assert first.args["thread_ts"] == root  # the status message came first, in the thread
    card_text = json.dumps(card["blocks"])
    for expected in ("ops.restart", ":red_circle: high", "<@U0DEV>", "<@U0LEAD>", '\\"api\\"'):
        assert expected in card_text
    assert ops_api.restarts == []

    assert await bot.click(card, APPROVE_ACTION, user="U0LEAD") == 200
    await bot.wait_idle()
    assert ops_api.restarts == ["api"]
    decided = card_in(fake_slack, root)
    assert decided is not None and not has_buttons(decided)
    assert "Approved by <@U0LEAD>" in json.dumps(decided["blocks"])
    posted = fake_slack.thread_messages(CHANNEL, root)[-1]
    assert posted["blocks"][0]["text"]["text"] == (
        "*Restarted*\n*api* is back. See <https://runbooks.example/api|the runbook>."
    )
    status = fake_slack.thread_messages(CHANNEL, root)[0]
    assert status["text"].startswith(":white_check_mark: Done")
    assert fake_slack.calls("chat.update")  # edited in place, never re-posted
    assert sum("Done" in t for t in texts(fake_slack, root)) == 1


async def test_reject_through_the_modal(
    bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, ops_api: OpsAPI
):
    fake_openai.respond_with(restart_then_answer)
    root, card = await bot.request_restart()

    await bot.click(card, REJECT_ACTION, user="U0LEAD")
    [opened] = fake_slack.calls("views.open")
    assert (
        await bot.submit_reject(opened.args["view"], user="U0LEAD", reason="not during the release")
        == 200
    )
    await bot.wait_idle()
    assert ops_api.restarts == []
    decided = card_in(fake_slack, root)
    assert decided is not None and not has_buttons(decided)
    assert "Rejected by <@U0LEAD>" in json.dumps(decided["blocks"])
    assert "not during the release" in json.dumps(decided["blocks"])
    tool_results = [
        m for body in fake_openai.requests for m in body["messages"] if m["role"] == "tool"
    ]
    assert any("not during the release" in str(m["content"]) for m in tool_results)


async def test_unauthorised_click_changes_nothing(
    bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, ops_api: OpsAPI
):
    fake_openai.respond_with(restart_then_answer)
    root, card = await bot.request_restart()
    updates_before = len(fake_slack.calls("chat.update"))

    await bot.click(card, APPROVE_ACTION, user="U0RANDOM")
    note = await fake_slack.wait_for(lambda: fake_slack.ephemeral, 15)
    assert note[0]["user"] == "U0RANDOM"
    assert note[0]["thread_ts"] == root
    assert "not one of the approvers" in note[0]["text"]
    assert ops_api.restarts == []
    assert has_buttons(fake_slack.messages[(CHANNEL, card["ts"])])
    card_updates = [
        c for c in fake_slack.calls("chat.update")[updates_before:] if c.args["ts"] == card["ts"]
    ]
    assert card_updates == []

    await bot.click(card, REJECT_ACTION, user="U0RANDOM")  # told at once, no reason dialog
    await fake_slack.wait_for(lambda: len(fake_slack.ephemeral) >= 2, 15)
    notes = fake_slack.ephemeral
    assert notes[1]["user"] == "U0RANDOM" and "not one of the approvers" in notes[1]["text"]
    assert fake_slack.calls("views.open") == []

    await bot.click(card, APPROVE_ACTION, user="U0LEAD")  # the real approver still can
    await bot.wait_idle()
    assert ops_api.restarts == ["api"]


async def test_retries_and_the_message_copy_start_one_run(
    bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI
):
    fake_openai.respond_with(
        lambda body: answer("All quiet.") if body.get("stream") else answer("nothing to do")
    )
    event = mention("how are things?")
    root = event["event"]["ts"]
    copy = message(event["event"]["text"], ts=root)
    assert await bot.send(event) == 200
    assert await bot.send(event, retry=1) == 200
    assert await bot.send(copy) == 200
    assert await bot.send(event, retry=2) == 200
    await bot.wait_idle()
    sent = fake_slack.calls("chat.postMessage") + fake_slack.calls("chat.startStream")
    posts = [c for c in sent if c.args.get("thread_ts") == root]
    assert len(posts) == 2  # one status message, one answer (streamed)
    assert len([b for b in fake_openai.requests if not b.get("stream")]) == 1


async def test_bad_signature_and_stale_timestamp_start_nothing(
    bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI
):
    assert await bot.send(mention("restart api"), secret="wrong-secret") == 401
    assert await bot.send(mention("restart api"), timestamp=int(time.time()) - 301) == 401
    assert fake_slack.calls("chat.postMessage") == []
    assert fake_openai.requests == []


async def test_429_storm_still_ends_with_the_final_status(
    bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI
):
    fake_openai.respond_with(restart_then_answer)
    root, card = await bot.request_restart()
    fake_slack.fail_next("chat.update", status=429, headers={"Retry-After": "0"}, count=4)
    await bot.click(card, APPROVE_ACTION, user="U0LEAD")
    await bot.wait_idle()
    assert [c.status for c in fake_slack.calls("chat.update")].count(429) == 4
    first = fake_slack.thread_messages(CHANNEL, root)[0]  # the status message
    assert first["text"].startswith(":white_check_mark: Done")
    decided = card_in(fake_slack, root)
    assert decided is not None and not has_buttons(decided)


async def test_thread_reply_during_a_run_is_an_interrupt(
    bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, ops_api: OpsAPI
):
    fake_openai.respond_with(restart_then_answer)
    root, card = await bot.request_restart()
    assert (
        await bot.send(message("also check the db afterwards", thread_ts=root, user="U0DEV")) == 200
    )
    await bot.click(card, APPROVE_ACTION, user="U0LEAD")
    await bot.wait_idle()
    seen = [
        m
        for body in fake_openai.requests
        if not body.get("stream")
        for m in body["messages"]
        if m["role"] == "user"
    ]
    assert any(
        "[USER INTERRUPT]" in str(m["content"]) and "check the db afterwards" in str(m["content"])
        for m in seen
    )
    assert ops_api.restarts == ["api"]


async def test_reply_in_a_thread_the_bot_is_not_in_is_ignored(
    bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI
):
    assert await bot.send(message("unrelated chatter", thread_ts="1600000000.000001")) == 200
    await bot.wait_idle()
    assert fake_slack.calls("chat.postMessage") == []
    assert fake_openai.requests == []


async def test_pending_approval_survives_a_restart(
    aiohttp_client, settings, fake_slack, fake_openai, ops_api
):
    """'New process' here is a second `create_app` on the same database, in the same test
    process, after the first app has been fully shut down (its cleanup contexts have run)."""
    fake_openai.respond_with(restart_then_answer)
    first = SlackBot(await aiohttp_client(create_app(settings)), fake_slack)
    root, card = await first.request_restart()
    await first.client.close()
    assert ops_api.restarts == []

    second = SlackBot(await aiohttp_client(create_app(settings)), fake_slack)
    assert await second.click(card, APPROVE_ACTION, user="U0LEAD") == 200
    await fake_slack.wait_for(lambda: ops_api.restarts, 15)
    await second.wait_idle()
    assert ops_api.restarts == ["api"]
    decided = card_in(fake_slack, root)
    assert decided is not None and "Approved by <@U0LEAD>" in json.dumps(decided["blocks"])
    posted = fake_slack.thread_messages(CHANNEL, root)[-1]
    assert "the runbook" in posted["text"]


async def test_reply_after_the_answer_is_the_next_turn_with_history(
    bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI
):
    fake_openai.respond_with(
        lambda body: answer("Both fine.") if body.get("stream") else answer("fine")
    )
    event = mention("how is the api?", user="U0DEV")
    root = event["event"]["ts"]
    await bot.send(event)
    await bot.wait_idle()
    asked = len(fake_openai.requests)
    assert await bot.send(message("and the db?", thread_ts=root, user="U0DEV")) == 200
    await bot.wait_idle()
    follow_up = fake_openai.requests[asked]
    contents = [str(m.get("content")) for m in follow_up["messages"]]
    assert any("how is the api?" in c for c in contents)  # the thread's history
    assert "and the db?" in contents[-1]
    answers = [m for m in fake_slack.thread_messages(CHANNEL, root) if m["text"] == "Both fine."]
    assert len(answers) == 2


async def test_direct_message_starts_a_conversation(
    bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI
):
    fake_openai.respond_with(
        lambda body: answer("Quiet night.") if body.get("stream") else answer("quiet")
    )
    event = message("anything on fire?", channel="D0DM", channel_type="im", user="U0DEV")
    root = event["event"]["ts"]
    assert await bot.send(event) == 200
    await bot.wait_idle()
    posted = fake_slack.thread_messages("D0DM", root)
    assert posted[-1]["text"] == "Quiet night."
    assert all(m.get("thread_ts") == root for m in posted)


async def test_expired_approval_updates_the_card(
    aiohttp_client, settings, fake_slack: FakeSlack, fake_openai: FakeOpenAI, ops_api: OpsAPI
):
    fake_openai.respond_with(restart_then_answer)
    quick = settings.model_copy(
        update={"chatops_approval_timeout_s": 0.5, "chatops_approval_remind_at": 0}
    )  # (reminders before expiry: tests/approvals/test_reminders.py)
    bot = SlackBot(await aiohttp_client(create_app(quick)), fake_slack)
    root, expired = await bot.request_restart(pending=False)
    [posted] = [c for c in fake_slack.calls("chat.postMessage") if "header" in str(c.args)]
    assert has_buttons(posted.args)  # posted with buttons, then edited in place
    assert "Expired" in json.dumps(expired["blocks"])
    await bot.wait_idle()
    assert ops_api.restarts == []


async def test_tokens_and_signing_secret_never_reach_the_logs(
    bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, caplog: pytest.LogCaptureFixture
):
    caplog.set_level(logging.DEBUG)
    fake_openai.respond_with(restart_then_answer)
    assert await bot.send(mention("restart api"), secret="wrong-secret") == 401
    event = mention("restart api", user="U0DEV")
    await bot.send(event)
    card = await wait_card(fake_slack, event["event"]["ts"], pending=True)
    await bot.click(card, APPROVE_ACTION, user="U0LEAD")
    await bot.wait_idle()
    assert "Sending a request" in caplog.text  # slack_sdk's debug log was captured
    for secret in (BOT_TOKEN, SIGNING_SECRET):
        assert secret not in caplog.text
