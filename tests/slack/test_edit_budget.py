"""Slack's chat.update budget (about 40 a minute per workspace) under 100 approvals: cards
showing a decision are edited before any status message waiting for the same budget."""

from __future__ import annotations

import asyncio
import heapq
import itertools
import json

import pytest

from bot.server import create_app
from bot.surfaces.slack.cards import APPROVE_ACTION
from bot.surfaces.slack.inbound import SLACK_INBOUND_KEY
from bot.surfaces.slack.outbound import UPDATES_PER_MINUTE, UpdateLimiter
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.ops_api import restart_then_answer
from tests.fakes.slack_api import TEAM_ID, FakeSlack
from tests.slack.e2e import OpsAPI, SlackBot, bot_settings, has_buttons, manifest, wait_card
from tests.slack.payloads import CHANNEL, as_body, block_actions, mention, signed_headers


class ManualClock:
    """The limiter's clock, turned by the test: the budget refills only when it says so."""

    def __init__(self) -> None:
        self.now = 0.0
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        future = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self.now + seconds, next(self._order), future))
        await future

    def advance(self, seconds: float) -> None:
        self.now += seconds
        while self._sleepers and self._sleepers[0][0] <= self.now:
            _, _, future = heapq.heappop(self._sleepers)
            if not future.done():
                future.set_result(None)


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
    )
    return SlackBot(await aiohttp_client(create_app(settings)), fake_slack)


async def test_decided_cards_lose_their_buttons_before_the_remaining_status_edits(
    bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI
) -> None:
    fake_openai.respond_with(restart_then_answer)
    clock = ManualClock()
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
