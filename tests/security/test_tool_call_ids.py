"""Hole 3: a tool call's id comes from the model server, which is not to be trusted with it.

Servers that omit ids, or send the same id twice, must never get a second call through on the
first call's approval: every call gets an id unique within its run, and approvals and the call
log key on it.
"""

from __future__ import annotations

import json
from typing import Any

from bot.storage.models import Approval, CallLog
from bot.surfaces.slack.cards import APPROVE_ACTION
from tests.fakes.openai_server import FakeOpenAI, Turn, answer
from tests.fakes.ops_api import OpsAPI
from tests.fakes.slack_api import FakeSlack
from tests.security.conftest import is_pending, wait_cards
from tests.slack.e2e import SlackBot
from tests.slack.payloads import CHANNEL, block_actions, mention


def restart(name: str, *, call_id: str | None) -> dict[str, Any]:
    """A native call as the server sends it; `call_id=None`: no id at all."""
    call: dict[str, Any] = {
        "type": "function",
        "function": {"name": "ops__restart", "arguments": json.dumps({"name": name})},
    }
    if call_id is not None:
        call["id"] = call_id
    return call


async def restart_twice(
    bot: SlackBot,
    fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
    ops_api: OpsAPI,
    db_rows,
    *,
    call_id: str | None,
) -> None:
    """The server sends two turns of the same restart with `call_id` (None: no id): each must
    get its own card and its own approval."""
    fake_openai.script(
        Turn(tool_calls=(restart("api", call_id=call_id),)),
        Turn(tool_calls=(restart("api", call_id=call_id),)),
        answer("Restarted twice."),
        answer("Restarted twice."),
    )
    event = mention("restart api twice", user="U0DEV")
    root = event["event"]["ts"]
    await bot.send(event)
    [first] = await wait_cards(fake_slack, root, 1)
    await bot.click(first, APPROVE_ACTION, user="U0LEAD")
    cards = await wait_cards(fake_slack, root, 2)
    assert is_pending(cards[1])
    assert ops_api.restarts == ["api"]  # the second call waits for its own approval
    await bot.click(cards[1], APPROVE_ACTION, user="U0LEAD")
    await bot.wait_idle()
    assert ops_api.restarts == ["api", "api"]
    approvals = db_rows(Approval)
    assert len(approvals) == 2 and len({a.tool_call_id for a in approvals}) == 2
    calls = db_rows(CallLog, tool_name="ops__restart")
    assert sorted(c.tool_call_id for c in calls) == sorted(a.tool_call_id for a in approvals)


async def test_a_repeated_tool_call_id_never_reuses_an_approval(
    bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, ops_api: OpsAPI, db_rows
) -> None:
    await restart_twice(bot, fake_slack, fake_openai, ops_api, db_rows, call_id="call_0")


async def test_a_missing_tool_call_id_never_reuses_an_approval(
    bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, ops_api: OpsAPI, db_rows
) -> None:
    await restart_twice(bot, fake_slack, fake_openai, ops_api, db_rows, call_id=None)


async def test_two_calls_with_one_id_in_one_reply_are_approved_apart(
    bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, ops_api: OpsAPI, db_rows
) -> None:
    """One reply, two calls with the same id: one batch card, yet two approvals, each decided
    by its own button (approving one never runs the other)."""
    fake_openai.script(
        Turn(tool_calls=(restart("api", call_id="dup"), restart("web", call_id="dup"))),
        answer("Both restarted."),
        answer("Both restarted."),
    )
    event = mention("restart api and web", user="U0DEV")
    root = event["event"]["ts"]
    await bot.send(event)
    rows = await fake_slack.wait_for(lambda: len(db_rows(Approval)) == 2 and db_rows(Approval))
    ids = {row.arguments["name"]: row.id for row in rows}
    [card] = await wait_cards(fake_slack, root, 1)
    await fake_slack.wait_for(lambda: ids["web"] in json.dumps(latest(fake_slack, card)))
    await bot.send(block_actions(card, APPROVE_ACTION, user="U0LEAD", value=ids["api"]))
    await fake_slack.wait_for(lambda: ops_api.restarts == ["api"])
    assert "web" not in ops_api.restarts
    await bot.send(block_actions(card, APPROVE_ACTION, user="U0LEAD", value=ids["web"]))
    await bot.wait_idle()
    assert sorted(ops_api.restarts) == ["api", "web"]
    assert len({a.tool_call_id for a in db_rows(Approval)}) == 2


def latest(fake: FakeSlack, card: dict[str, Any]) -> dict[str, Any]:
    """The card as it reads now (the batch card is edited as its calls are recorded)."""
    return next(
        m for m in fake.thread_messages(CHANNEL, card["thread_ts"]) if m["ts"] == card["ts"]
    )
