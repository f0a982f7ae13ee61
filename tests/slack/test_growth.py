"""Unbounded growth, bounded: over CHATOPS_MAX_ACTIVE_RUNS a request is told to try again (no
run starts), and dedupe rows past the platforms' retry window are pruned as events arrive."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlmodel import Session, select

from bot.clock import utcnow
from bot.recent_events import RecentEvents
from bot.server import RUNTIME_KEY
from bot.storage.models import ProcessedEvent, Run
from tests.fakes.openai_server import FakeOpenAI, answer, tool_call
from tests.fakes.slack_api import FakeSlack
from tests.slack.e2e import SlackBot, ops_bot, wait_card
from tests.slack.payloads import CHANNEL, mention


@pytest.fixture
async def bot(
    database_url, aiohttp_client, tmp_path, ops_api, fake_slack: FakeSlack, fake_openai
) -> SlackBot:
    return await ops_bot(aiohttp_client, database_url, tmp_path, ops_api.url, fake_slack,
                         fake_openai.base_url, chatops_max_active_runs=1)  # fmt: skip


def runs(bot: SlackBot) -> list[Run]:
    with Session(bot.app[RUNTIME_KEY].engine) as session:
        return list(session.exec(select(Run)))


async def test_a_request_over_the_cap_is_told_to_try_again_and_starts_nothing(
    bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script(tool_call("ops__restart", {"name": "api"}))  # waits for approval
    first = mention("restart api", user="U0DEV")
    await bot.send(first)
    await wait_card(fake_slack, first["event"]["ts"], pending=True)
    asked = len(fake_openai.requests)

    second = mention("and check the db", user="U0OTHER")
    assert await bot.send(second) == 200
    [notice] = fake_slack.thread_messages(CHANNEL, second["event"]["ts"])
    assert "busy" in notice["text"] and "try again in a minute" in notice["text"]
    assert len(runs(bot)) == 1 and len(fake_openai.requests) == asked

    reply = mention("restart it now please", user="U0DEV", thread_ts=first["event"]["ts"])
    assert await bot.send(reply) == 200  # a reply to the running thread is still read
    assert len(runs(bot)) == 1
    assert not any(
        "busy" in m["text"] for m in fake_slack.thread_messages(CHANNEL, first["event"]["ts"])
    )


async def test_dedupe_rows_past_the_retry_window_are_pruned(
    bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI
) -> None:
    engine = bot.app[RUNTIME_KEY].engine
    now = utcnow()
    with Session(engine) as session:
        for i in range(30):
            session.add(ProcessedEvent(event_id=f"slack:old{i}", platform="slack",
                                       created_at=now - timedelta(days=2, minutes=i)))  # fmt: skip
        session.add(ProcessedEvent(event_id="slack:recent", platform="slack",
                                   created_at=now - timedelta(hours=1)))  # fmt: skip
        session.commit()
    fake_openai.script(answer("ok"), answer("ok"))
    event = mention("hello", user="U0DEV")
    await bot.send(event)
    await bot.wait_idle()
    with Session(engine) as session:
        left = {row.event_id for row in session.exec(select(ProcessedEvent))}
    assert not [e for e in left if e.startswith("slack:old")]
    assert "slack:recent" in left and len(left) == 2  # the recent one and this event's
    assert await bot.send(event) == 200  # a retry inside the window is still a duplicate
    assert len(runs(bot)) == 1


def test_the_in_memory_event_cache_is_bounded() -> None:
    recent = RecentEvents(ttl_s=600, max_items=1000)
    assert not any(recent.seen(f"Ev{i}") for i in range(5000))
    assert recent.seen("Ev4999") and not recent.seen("Ev0")  # the oldest were evicted
    assert len(recent._ids) <= 1000
