"""Issue 11 item 9 on Feishu: growth stays bounded through the real app. Over
CHATOPS_MAX_ACTIVE_RUNS a request is told to try again and starts nothing; dedupe rows past the
retry window are pruned as events arrive (a retry inside it is still a duplicate); the sender's
per-message limiter forgets messages whose slots have passed. SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from sqlmodel import Session, select

from bot.clock import utcnow
from bot.rate_limits import PRUNE_EVERY
from bot.server import RUNTIME_KEY, create_app
from bot.storage.models import ProcessedEvent, Run
from bot.surfaces.feishu.send import message_rate_limiter
from tests.fakes.feishu_api import FakeFeishu
from tests.fakes.openai_server import FakeOpenAI, answer, tool_call
from tests.feishu.e2e import DEV, FeishuBot, bot_settings, manifest


@pytest.fixture
async def bot(
    tmp_path, database_url, ops_api, fake_feishu: FakeFeishu, fake_openai, aiohttp_client
) -> FeishuBot:
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    (manifests / "ops.yaml").write_text(manifest(ops_api.url))
    settings = bot_settings(
        database_url=database_url, manifests=manifests, fake=fake_feishu,
        llm_url=fake_openai.base_url, chatops_max_active_runs=1,
    )  # fmt: skip
    return FeishuBot(await aiohttp_client(create_app(settings)), fake_feishu)


def runs(bot: FeishuBot) -> list[Run]:
    with Session(bot.client.app[RUNTIME_KEY].engine) as session:
        return list(session.exec(select(Run)))


async def test_a_feishu_request_over_the_cap_is_told_to_try_again_and_starts_nothing(
    bot: FeishuBot, fake_feishu: FakeFeishu, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script(tool_call("ops__restart", {"name": "api"}))  # waits for approval
    root, _ = await bot.request_restart()
    asked = len(fake_openai.requests)

    second = fake_feishu.message_event("and check the db", user="ou_other")
    await bot.send(second)
    busy = await fake_feishu.wait_for(
        lambda f: [
            m for m in f.replies_to(second["event"]["message"]["message_id"])
            if "try again in a minute" in str(m.content)
        ],
        10,
    )  # fmt: skip
    assert busy and len(runs(bot)) == 1 and len(fake_openai.requests) == asked
    reply = fake_feishu.message_event("restart it now please", user=DEV, root_id=root)
    await bot.send(reply)  # a reply to the running thread is still read, not refused
    assert len(runs(bot)) == 1
    assert not [m for m in fake_feishu.replies_to(root) if "try again" in str(m.content)]


async def test_feishu_dedupe_rows_past_the_retry_window_are_pruned(
    bot: FeishuBot, fake_feishu: FakeFeishu, fake_openai: FakeOpenAI
) -> None:
    engine = bot.client.app[RUNTIME_KEY].engine
    now = utcnow()
    with Session(engine) as session:
        for i in range(30):
            session.add(ProcessedEvent(event_id=f"feishu:old{i}", platform="feishu",
                                       created_at=now - timedelta(days=2, minutes=i)))  # fmt: skip
        session.add(ProcessedEvent(event_id="feishu:recent", platform="feishu",
                                   created_at=now - timedelta(hours=6)))  # fmt: skip
        session.commit()
    fake_openai.script(answer("ok"), answer("ok"))
    event = fake_feishu.message_event("hello", user=DEV)
    await bot.send(event)
    await bot.wait_idle()
    with Session(engine) as session:
        left = {row.event_id for row in session.exec(select(ProcessedEvent))}
    assert not [e for e in left if e.startswith("feishu:old")]
    assert "feishu:recent" in left and len(left) >= 2  # the recent one and this event's
    await bot.send(event)  # Feishu re-pushes it: still a duplicate
    await bot.wait_idle()
    assert len(runs(bot)) == 1


async def test_the_feishu_message_limiter_forgets_messages_whose_slots_passed() -> None:
    """One bucket per message the bot edits, and a long-lived process edits millions: every
    PRUNE_EVERY uses the buckets that have drained are dropped, so only recent messages stay."""
    limiter = message_rate_limiter(5.0)  # one call per 0.2 s on each message
    for i in range(600):
        await limiter.acquire(f"om_old_{i}")  # a new message: no wait
    await asyncio.sleep(0.3)  # every old message's slot has passed
    fresh = 3 * PRUNE_EVERY - 600  # the next prune comes with the last of these
    for i in range(fresh):
        await limiter.acquire(f"om_new_{i}")
    assert 1 <= len(limiter) <= fresh
