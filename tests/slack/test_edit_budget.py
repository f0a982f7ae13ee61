"""Slack's chat.update budget (about 40 a minute per workspace) under 100 approvals: cards
showing a decision are edited before any status message waiting for the same budget."""

from __future__ import annotations

import asyncio
import json

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from bot.chat.threads import ThreadRef
from bot.engine.events import IterationDone, IterationStart
from bot.runs.status import StatusReporter
from bot.server import create_app
from bot.surfaces.slack.cards import APPROVE_ACTION
from bot.surfaces.slack.inbound import SLACK_INBOUND_KEY
from bot.surfaces.slack.limiter import UPDATES_PER_MINUTE, UpdateLimiter
from bot.surfaces.slack.outbound import SlackSurface
from tests.fakes.monotonic import ManualMonotonic
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.ops_api import restart_then_answer
from tests.fakes.slack_api import BOT_TOKEN, TEAM_ID, FakeSlack
from tests.slack.e2e import OpsAPI, SlackBot, bot_settings, has_buttons, manifest, wait_card
from tests.slack.payloads import CHANNEL, as_body, block_actions, mention, signed_headers


@pytest.fixture
async def bot(tmp_path, database_url, ops_api: OpsAPI, fake_slack, fake_openai, aiohttp_client):
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    (manifests / "ops.yaml").write_text(manifest(ops_api.url))
    settings = bot_settings(
        database_url=database_url,
        manifests=manifests,
        slack=fake_slack,
        llm_url=fake_openai.base_url,
        chatops_max_active_runs=200,  # the point here is many runs at once
        chatops_max_active_runs_per_user=200,  # all of them one person's
        chatops_max_pending_approvals_per_user=200,
    )
    return SlackBot(await aiohttp_client(create_app(settings)), fake_slack)


async def test_decided_cards_lose_their_buttons_before_the_remaining_status_edits(
    bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI
) -> None:
    fake_openai.respond_with(restart_then_answer)
    clock = ManualMonotonic()
    limiter = UpdateLimiter(clock=clock, sleep=clock.sleep)  # the default budget, turned by hand
    bot.app[SLACK_INBOUND_KEY].surface.limiter = limiter
    events = [as_body(mention(f"restart api ({i})", user="U0DEV")) for i in range(100)]
    await post_all(bot, events)
    roots = [json.loads(body)["event"]["ts"] for body in events]
    cards = [await wait_card(fake_slack, root, pending=True) for root in roots]

    # every card is approved while the budget is spent (the status edits of 100 runs queue)
    async with limiter.queue_changed:
        await asyncio.wait_for(
            limiter.queue_changed.wait_for(lambda: limiter.waiting(TEAM_ID)[1] > 0), 60
        )
    await post_all(bot, [block_actions(card, APPROVE_ACTION, user="U0LEAD") for card in cards])
    async with limiter.queue_changed:
        await asyncio.wait_for(
            limiter.queue_changed.wait_for(lambda: limiter.waiting(TEAM_ID)[0] == 100), 60
        )

    # the budget refills one edit at a time: the first hundred edits are the hundred cards
    edited = len(fake_slack.calls("chat.update"))
    for n in range(1, 101):
        clock.advance(60 / UPDATES_PER_MINUTE)
        await fake_slack.wait_for(lambda n=n: len(fake_slack.calls("chat.update")) >= edited + n)
    card_ts = {card["ts"] for card in cards}
    first_hundred = fake_slack.calls("chat.update")[edited:]
    assert [c.args["ts"] in card_ts for c in first_hundred] == [True] * 100
    assert not any(has_buttons(fake_slack.messages[(CHANNEL, card["ts"])]) for card in cards)


async def post_all(bot: SlackBot, bodies: list[str]) -> None:
    """Post signed requests as Slack does, each answered 200 (processing may go on after)."""
    for body in bodies:
        response = await bot.client.post("/slack/events", data=body, headers=signed_headers(body))
        assert response.status == 200


THREAD = ThreadRef("slack", TEAM_ID, CHANNEL, "1700000000.000900")


async def test_a_status_message_short_of_budget_paces_itself_out_of_the_queue(
    fake_slack: FakeSlack,
) -> None:
    """An edit that queued 3 s for the workspace's budget spaces the next one 3 s apart (not the
    usual 1 s): meanwhile the status message is out of the limiter's queue, leaving the budget
    to decided cards and other runs, and the states it skipped coalesce into one edit that
    shows the latest. (Times are multiples of 1/4 s, exact in binary.)"""
    clock = ManualMonotonic()
    limiter = UpdateLimiter(per_minute=15, burst=1, clock=clock, sleep=clock.sleep)
    surface = SlackSurface(AsyncWebClient(token=BOT_TOKEN, base_url=fake_slack.url), limiter)
    await limiter.acquire(TEAM_ID)  # the budget is spent: a token comes back every 4 s
    reporter = StatusReporter(surface, THREAD, min_interval_s=1.0, clock=clock, sleep=clock.sleep)
    ref = await reporter.open()

    reporter.on_event(IterationStart(1, "ops__status", {}, tool_call_id="a"))
    clock.advance(1.0)  # the interval passes: the edit queues for the budget until t = 4 s
    await queued(limiter, (0, 1))
    clock.advance(3.0)
    await fake_slack.wait_for(lambda: len(fake_slack.calls("chat.update")) == 1)

    reporter.on_event(IterationDone(1, "ops__status", "ok", tool_call_id="a"))
    await clock.wait_sleeping(1)  # the edit is back and the next one is paced
    clock.advance(2.0)  # the usual interval is over, but the last edit waited 3 s
    for _ in range(20):
        await asyncio.sleep(0)  # give the flusher every chance to queue (it must not)
    assert limiter.waiting(TEAM_ID) == (0, 0) and clock.sleeping == 1

    reporter.on_event(IterationStart(2, "ops__deploy", {}, tool_call_id="b"))
    clock.advance(1.0)  # 3 s after the last edit: now it asks for the budget again
    await queued(limiter, (0, 1))
    clock.advance(1.0)
    await fake_slack.wait_for(lambda: len(fake_slack.calls("chat.update")) == 2)
    shown = fake_slack.messages[(THREAD.channel, ref.message_id)]["text"]
    assert "ops__deploy" in shown  # one edit for both states, showing the latest

    await reporter.close()
    assert len(fake_slack.calls("chat.update")) == 2


async def queued(limiter: UpdateLimiter, waiting: tuple[int, int]) -> None:
    async with limiter.queue_changed:
        await asyncio.wait_for(
            limiter.queue_changed.wait_for(lambda: limiter.waiting(TEAM_ID) == waiting), 10
        )
