"""SlackSurface against FakeSlack through the real slack_sdk AsyncWebClient: posts, in-place
edits, 429 Retry-After, size limits, ephemeral notes; and the per-workspace edit limiter."""

from __future__ import annotations

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.chat.threads import ThreadRef
from bot.chat.views import ApprovalCardView, StatusStep, StatusView
from bot.surfaces.slack.limiter import LimiterPausingRetryHandler, UpdateLimiter
from bot.surfaces.slack.outbound import SlackSurface
from tests.fakes.slack_api import BOT_TOKEN, TEAM_ID, FakeSlack

THREAD = ThreadRef("slack", TEAM_ID, "C0OPS", "1700000000.000500")


@pytest.fixture
def surface(fake_slack: FakeSlack) -> SlackSurface:
    limiter = UpdateLimiter()
    client = AsyncWebClient(
        token=BOT_TOKEN,
        base_url=fake_slack.url,
        retry_handlers=[LimiterPausingRetryHandler(limiter)],
    )
    return SlackSurface(client, limiter)


async def test_status_is_posted_in_the_thread_then_edited_in_place(surface, fake_slack):
    ref = await surface.post_status(THREAD, StatusView(state="running"))
    view = StatusView(
        state="done", steps=(StatusStep("ops__status", "done", 0.2),), totals="1 tool"
    )
    await surface.update_status(ref, view)
    [post] = fake_slack.calls("chat.postMessage")
    assert post.args["thread_ts"] == THREAD.root
    assert post.headers["Authorization"] == f"Bearer {BOT_TOKEN}"
    [update] = fake_slack.calls("chat.update")
    assert update.args["ts"] == ref.message_id
    stored = fake_slack.messages[(THREAD.channel, ref.message_id)]
    assert stored["text"].startswith(":white_check_mark: Done")
    assert len(fake_slack.thread_messages(THREAD.channel, THREAD.root)) == 1


async def test_429_storm_is_retried_after_retry_after_and_lands(surface, fake_slack):
    ref = await surface.post_status(THREAD, StatusView(state="running"))
    fake_slack.fail_next("chat.update", status=429, headers={"Retry-After": "0"}, count=3)
    await surface.update_status(ref, StatusView(state="done", headline="all good"))
    updates = fake_slack.calls("chat.update")
    assert [c.status for c in updates] == [429, 429, 429, 200]
    assert "all good" in fake_slack.messages[(THREAD.channel, ref.message_id)]["text"]


async def test_rate_limited_answer_is_posted_after_retry(surface, fake_slack):
    fake_slack.fail_next("chat.postMessage", status=429, headers={"Retry-After": "0"})
    await surface.post_answer(THREAD, "**done**")
    assert [c.status for c in fake_slack.calls("chat.postMessage")] == [429, 200]


async def test_long_answer_is_split_into_messages_slack_accepts(surface, fake_slack):
    markdown = "\n\n".join(f"### Host {i}\n" + "status ok, " * 300 for i in range(60))
    ref = await surface.post_answer(THREAD, markdown)
    posts = fake_slack.calls("chat.postMessage")
    assert len(posts) > 1
    assert all(p.args["thread_ts"] == THREAD.root for p in posts)
    assert ref.message_id == fake_slack.thread_messages(THREAD.channel, THREAD.root)[0]["ts"]
    text = "".join(b["text"]["text"] for p in posts for b in p.args["blocks"])
    assert text.count("*Host ") == 60


async def test_card_update_removes_buttons(surface, fake_slack):
    view = ApprovalCardView(
        approval_id="ap-1",
        tool_name="ops__restart",
        connector="ops",
        action="restart",
        risk="low",
        requester="U0DEV",
        reason="",
        arguments="{}",
    )
    ref = await surface.post_approval_card(THREAD, view)
    stored = fake_slack.messages[(THREAD.channel, ref.message_id)]
    assert any(b["type"] == "actions" for b in stored["blocks"])
    await surface.update_approval_card(
        ref, ApprovalCardView(**{**view.__dict__, "state": "approved", "decided_by": ("U0LEAD",)})
    )
    assert not any(b["type"] == "actions" for b in stored["blocks"])
    assert "Approved by <@U0LEAD>" in str(stored["blocks"])


async def test_notice_and_private_note(surface, fake_slack):
    await surface.post_notice(THREAD, "approval still waiting", mention=["U0LEAD", "U0OPS"])
    assert fake_slack.calls("chat.postMessage")[0].args["text"] == (
        "<@U0LEAD> <@U0OPS> approval still waiting"
    )
    await surface.notify_user(THREAD, "U0X", "you may not approve this")
    [note] = fake_slack.ephemeral
    assert (note["user"], note["channel"], note["thread_ts"]) == ("U0X", "C0OPS", THREAD.root)


async def test_api_errors_surface_as_slack_api_error(surface, fake_slack):
    fake_slack.fail_next("chat.postMessage", error="channel_not_found")
    with pytest.raises(SlackApiError):
        await surface.post_notice(THREAD, "hello")


async def test_limiter_allows_a_burst_then_paces_edits():
    now = [0.0]
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(round(seconds, 3))
        now[0] += seconds

    limiter = UpdateLimiter(per_minute=30, burst=2, clock=lambda: now[0], sleep=sleep)
    for _ in range(4):
        await limiter.acquire(TEAM_ID)
    assert slept == [2.0, 2.0]  # two free, then one every 60/30 seconds
    await limiter.acquire("T0OTHER")  # another workspace has its own bucket
    assert slept == [2.0, 2.0]
    limiter.pause(5.0)
    now[0] += 10.0
    await limiter.acquire(TEAM_ID)
    assert slept == [2.0, 2.0]
    limiter.pause(5.0)
    await limiter.acquire(TEAM_ID)
    assert slept == [2.0, 2.0, 5.0]
