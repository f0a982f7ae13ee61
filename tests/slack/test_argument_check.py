"""Arguments are checked before anyone is asked to approve (Slack end to end).

A model's call that the tool's schema refuses is answered to the model at once and posts no
approval card; only the corrected, valid call reaches a card. Runs on SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlmodel import Session, select

from bot.server import RUNTIME_KEY, create_app
from bot.storage.models import Approval, CallLog
from bot.surfaces.slack.cards import APPROVE_ACTION
from tests.fakes.openai_server import FakeOpenAI, Turn, answer, tool_call
from tests.fakes.slack_api import FakeSlack
from tests.slack.e2e import ANSWER, OpsAPI, SlackBot, card_in, ops_settings, wait_card
from tests.slack.payloads import CHANNEL, mention


@pytest.fixture
def settings(tmp_path, database_url, ops_api, fake_slack, fake_openai):
    return ops_settings(
        tmp_path, database_url=database_url, ops_api=ops_api, slack=fake_slack,
        llm_url=fake_openai.base_url,
    )  # fmt: skip


@pytest.fixture
async def bot(aiohttp_client, settings, fake_slack) -> SlackBot:
    return SlackBot(await aiohttp_client(create_app(settings)), fake_slack)


def tool_results(body: dict[str, Any]) -> list[str]:
    return [str(m["content"]) for m in body["messages"] if m["role"] == "tool"]


def wrong_then_right(body: dict[str, Any]) -> Turn:
    """The model: restart with a misnamed argument, then (told why) with the right one."""
    if body.get("stream"):
        return answer(ANSWER)
    results = tool_results(body)
    if not results:
        return tool_call("ops__restart", {"service": "api"}, id="call_wrong")
    if len(results) == 1:
        return tool_call("ops__restart", {"name": "api"}, id="call_right")
    return answer("api restarted")


def rows(bot: SlackBot, model: type) -> list[Any]:
    with Session(bot.app[RUNTIME_KEY].engine) as session:
        return list(session.exec(select(model)).all())


async def test_an_invalid_call_posts_no_card_and_the_model_is_told_why(
    bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, ops_api: OpsAPI
) -> None:
    fake_openai.respond_with(wrong_then_right)
    event = mention("please restart the api", user="U0DEV")
    root = event["event"]["ts"]
    assert await bot.send(event) == 200

    card = await wait_card(fake_slack, root, pending=True)
    assert '\\"name\\": \\"api\\"' in json.dumps(card["blocks"])  # the valid call's card
    told = tool_results(fake_openai.requests[1])
    assert told[0].startswith("Error: Invalid arguments for ops__restart; nothing was sent.")
    assert "'name' is a required property" in told[0]
    [approval] = rows(bot, Approval)  # the invalid call asked nobody
    assert json.loads(json.dumps(approval.arguments)) == {"name": "api"}

    assert await bot.click(card, APPROVE_ACTION, user="U0LEAD") == 200
    await bot.wait_idle()
    assert ops_api.restarts == ["api"]
    cards = [m for m in fake_slack.thread_messages(CHANNEL, root) if m is card_in(fake_slack, root)]
    assert len(cards) == 1
    wrong, right = sorted(rows(bot, CallLog), key=lambda row: row.id)
    assert (wrong.tool_call_id, wrong.result_status) == ("call_wrong", "blocked")
    assert wrong.approval_id is None and "blocked by argument_check" in (wrong.error or "")
    assert (right.tool_call_id, right.result_status) == ("call_right", "ok")
    assert right.approval_status == "approved"
