"""A batch across two real `chatops serve` processes on one PostgreSQL database: process A
owns the run and posted the one card of its two calls; one call is approved through process
B, then "Approve all" (the rest of the batch) through A again from a copy of the card as it
first looked. Each call runs once, the card ends folded with both calls approved, and each
call has its own approval row and call-log row."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from bot.storage.models import Approval, CallLog
from bot.surfaces.slack.batch_card import APPROVE_ALL_ACTION
from bot.surfaces.slack.cards import APPROVE_ACTION
from tests.databases import rows
from tests.fakes.openai_server import FakeOpenAI, Turn, answer, tool_calls
from tests.fakes.ops_api import ANSWER, OpsAPI
from tests.fakes.slack_api import FakeSlack
from tests.security.conftest import approval_cards
from tests.server.test_processes import answered, root_of, thread_on_two
from tests.slack.payloads import block_actions

pytestmark = pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)


def batch_model(body: dict[str, Any]) -> Turn:
    """Restart api and web in one response; once the results are in, finish."""
    if body.get("stream"):
        return answer(ANSWER)
    if any(m["role"] == "tool" for m in body["messages"]):
        return answer("both restarted")
    return tool_calls(("ops__restart", {"name": "api"}), ("ops__restart", {"name": "web"}))


def approve_buttons(card: dict[str, Any]) -> list[str]:
    return [e["value"] for b in card["blocks"] if b.get("type") == "actions"
            for e in b["elements"] if e["action_id"] == APPROVE_ACTION]  # fmt: skip


FOLDED = "Approvals: 2 calls"


def folded_header(fake: FakeSlack, root: str) -> str:
    """The first line of the thread's one approval card, as it stands."""
    [card] = approval_cards(fake, root)
    return str(card["blocks"][0]["text"]["text"])


async def test_a_batch_is_decided_through_both_processes(
    tmp_path: Path, database_url: str, ops_api: OpsAPI, fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
) -> None:  # fmt: skip
    async with thread_on_two(
        tmp_path, database_url, ops_api, fake_slack, fake_openai, batch_model
    ) as (a, b, slack, event):
        root = root_of(event)
        assert await slack.send(a, event) == 200
        card = await fake_slack.wait_for(
            lambda: (cards := approval_cards(fake_slack, root))
            and len(approve_buttons(cards[0])) == 2 and cards[0], 30,
        )  # fmt: skip
        first = json.loads(json.dumps(card))  # as it first looked
        for _ in range(100):  # both calls recorded on the one card
            if all(r.card_message_id == card["ts"] for r in rows(database_url, Approval)):
                break
            await asyncio.sleep(0.1)
        web = next(r for r in rows(database_url, Approval) if r.arguments["name"] == "web")
        assert (
            await slack.send(b, block_actions(first, APPROVE_ACTION, user="U0LEAD", value=web.id))
            == 200
        )
        await fake_slack.wait_for(lambda: ops_api.restarts == ["web"], 30)
        assert await slack.send(a, block_actions(first, APPROVE_ALL_ACTION, user="U0LEAD")) == 200
        await answered(fake_slack, root)
        # the card's last edit may come after the answer: edits are paced by Slack's budget,
        # which the two processes share; it must come, and show both calls decided
        await fake_slack.wait_for(lambda: folded_header(fake_slack, root) == FOLDED, 30)
    assert sorted(ops_api.restarts) == ["api", "web"]
    approvals = rows(database_url, Approval)
    assert len({r.batch_id for r in approvals}) == 1 and len(approvals) == 2
    assert {r.status for r in approvals} == {"approved"}
    logged = [c for c in rows(database_url, CallLog) if c.tool_name == "ops__restart"]
    assert sorted(c.result_status for c in logged) == ["ok", "ok"]
    assert folded_header(fake_slack, root) == FOLDED
