"""A tool's question on Slack: a message in the thread with "Answer…" and "Decline"; "Answer…"
opens a modal (views.open, checked by FakeSlack against slack_sdk's view models) with one input
per field, a submission is checked against the requested schema (`response_action: errors`),
only the run's requesters may answer, Stop cancels; and neither way does a question's answer
decide an approval, nor an approval's click answer a question."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from bot.storage.models import Approval, CallLog
from bot.surfaces.slack.cards import APPROVE_ACTION, REJECT_ACTION
from bot.surfaces.slack.edit_modal import EDIT_MODAL
from bot.surfaces.slack.inbound import SLACK_INBOUND_KEY
from bot.surfaces.slack.question_card import (
    QUESTION_ANSWER_ACTION,
    QUESTION_DECLINE_ACTION,
    QUESTION_MODAL,
)
from bot.surfaces.slack.render import STOP_ACTION
from tests.elicitation.conftest import WINDOW_TEXT, calling, tool_results
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_api import FakeSlack, valid_view
from tests.security.conftest import approval_cards, ephemeral_to, wait_cards
from tests.slack.e2e import SlackBot
from tests.slack.payloads import CHANNEL, as_body, block_actions, mention, signed_headers, submitted

RESTART = ("rich__restart", {"service": "api"})
WINDOW = {"minutes": "30", "reason": "deploy 1.2", "decision": "approve"}


def has_action(message: dict[str, Any], action_id: str) -> bool:
    return any(
        e.get("action_id") == action_id
        for b in message.get("blocks", []) if b.get("type") == "actions"
        for e in b["elements"]
    )  # fmt: skip


def question_message(fake: FakeSlack, root: str) -> dict[str, Any] | None:
    for message in fake.thread_messages(CHANNEL, root):
        if "asks (a question, not an approval)" in json.dumps(message.get("blocks", [])):
            return message
    return None


async def ask(bot: SlackBot, fake_openai: FakeOpenAI, *calls) -> tuple[str, dict[str, Any]]:
    """U0DEV asks; the model makes `calls` at once; the question message once it is posted."""
    fake_openai.respond_with(calling(*(calls or (RESTART,))))
    event = mention("restart the api", user="U0DEV")
    root = event["event"]["ts"]
    await bot.send(event)
    found = await bot.fake.wait_for(lambda: question_message(bot.fake, root), 60)
    return root, copy.deepcopy(found)  # as posted (the fake edits its messages in place)


async def open_modal(bot: SlackBot, question: dict[str, Any], *, user: str) -> dict[str, Any]:
    before = len(bot.fake.calls("views.open"))
    await bot.click(question, QUESTION_ANSWER_ACTION, user=user)
    opened = await bot.fake.wait_for(lambda: bot.fake.calls("views.open")[before:], 10)
    return opened[0].args["view"]


def state(view: dict[str, Any], texts: dict[str, str]) -> dict[str, Any]:
    """What Slack sends for the modal's inputs with `texts` typed (selects: the option)."""
    values: dict[str, Any] = {}
    for block in view["blocks"]:
        if block["type"] != "input":
            continue
        element, text = block["element"], texts.get(block["block_id"].removeprefix("arg:"))
        if element["type"] == "static_select":
            option = next((o for o in element["options"] if o["value"] == text), None)
            values[block["block_id"]] = {"value": {"type": "static_select",
                                                   "selected_option": option}}  # fmt: skip
        else:
            values[block["block_id"]] = {"value": {"type": element["type"], "value": text}}
    return values


async def submit(bot: SlackBot, view: dict[str, Any], values: dict, *, user: str) -> Any:
    """The signed `view_submission`; bolt's JSON answer (None: an empty ack)."""
    body = as_body(submitted(view, values, user=user))
    response = await bot.client.post("/slack/events", data=body, headers=signed_headers(body))
    assert response.status == 200
    text = await response.text()
    await bot.app[SLACK_INBOUND_KEY].wait_idle(10)
    return json.loads(text) if text else None


def forged(card: dict[str, Any], button: str, action_id: str, value: str, *, user: str) -> str:
    """A click on `card`'s `button` whose action id and value were swapped by the attacker."""
    from urllib.parse import parse_qs, urlencode

    payload = json.loads(parse_qs(block_actions(card, button, user=user))["payload"][0])
    payload["actions"][0].update(action_id=action_id, value=value)
    return urlencode({"payload": json.dumps(payload)})


async def test_a_requester_answers_in_the_modal_checked_against_the_schema(
    slack_bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI
) -> None:
    root, question = await ask(slack_bot, fake_openai)
    assert has_action(question, QUESTION_ANSWER_ACTION) and has_action(
        question, QUESTION_DECLINE_ACTION
    )
    assert "When may api restart?" in json.dumps(question["blocks"])

    # someone else in the channel: told privately, no modal
    await slack_bot.click(question, QUESTION_ANSWER_ACTION, user="U0EVE")
    await fake_slack.wait_for(lambda: ephemeral_to(fake_slack, "U0EVE"), 10)
    assert "Only the people who asked" in ephemeral_to(fake_slack, "U0EVE")[0]
    assert fake_slack.calls("views.open") == []

    view = await open_modal(slack_bot, question, user="U0DEV")
    assert view["callback_id"] == QUESTION_MODAL and valid_view(view)
    inputs = {b["block_id"]: b for b in view["blocks"] if b["type"] == "input"}
    assert list(inputs) == ["arg:minutes", "arg:reason", "arg:decision"]
    assert inputs["arg:minutes"]["element"]["type"] == "number_input"
    assert inputs["arg:minutes"]["optional"] is False
    assert [o["value"] for o in inputs["arg:decision"]["element"]["options"]] == [
        "approve", "reject",
    ]  # fmt: skip

    bad = await submit(slack_bot, view, state(view, {**WINDOW, "minutes": "500"}), user="U0DEV")
    assert bad["response_action"] == "errors" and list(bad["errors"]) == ["arg:minutes"]
    missing = await submit(slack_bot, view, state(view, {"minutes": "30"}), user="U0DEV")
    assert missing == {"response_action": "errors", "errors": {"arg:reason": "required"}}
    eve = await submit(slack_bot, view, state(view, WINDOW), user="U0EVE")
    assert eve["response_action"] == "errors"
    assert "Only the people who asked" in eve["errors"]["arg:minutes"]

    assert await submit(slack_bot, view, state(view, WINDOW), user="U0DEV") is None
    await slack_bot.wait_idle()
    assert list(tool_results(fake_openai).values()) == [WINDOW_TEXT]
    shown = question_message(fake_slack, root)
    assert shown is not None and not has_action(shown, QUESTION_ANSWER_ACTION)
    assert "Answered by <@U0DEV>" in json.dumps(shown["blocks"])
    late = await submit(slack_bot, view, state(view, WINDOW), user="U0DEV")
    assert "no such open question" in late["errors"]["arg:minutes"]


async def test_decline_reaches_the_server_and_stop_cancels(
    slack_bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI
) -> None:
    root, question = await ask(slack_bot, fake_openai)
    await slack_bot.click(question, QUESTION_DECLINE_ACTION, user="U0EVE")  # not a requester
    await fake_slack.wait_for(lambda: ephemeral_to(fake_slack, "U0EVE"), 10)
    await slack_bot.click(question, QUESTION_DECLINE_ACTION, user="U0DEV")
    await slack_bot.wait_idle()
    assert list(tool_results(fake_openai).values()) == ["restart of api: decline"]
    shown = question_message(fake_slack, root)
    assert shown is not None and "Declined by <@U0DEV>" in json.dumps(shown["blocks"])

    root, question = await ask(slack_bot, fake_openai)
    status = next(
        m for m in fake_slack.thread_messages(CHANNEL, root) if has_action(m, STOP_ACTION)
    )
    await slack_bot.click(status, STOP_ACTION, user="U0DEV")
    await fake_slack.wait_for(
        lambda: "Cancelled" in json.dumps(question_message(fake_slack, root)["blocks"]), 30
    )
    await slack_bot.wait_idle()
    await slack_bot.click(question, QUESTION_ANSWER_ACTION, user="U0DEV")
    await fake_slack.wait_for(
        lambda: any("no such open question" in t for t in ephemeral_to(fake_slack, "U0DEV")), 10
    )
    assert fake_slack.calls("views.open") == []


@pytest.mark.both_databases
async def test_question_and_approval_never_answer_each_other(
    slack_bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, ops_api, db_rows
) -> None:
    """A question and an approval wait in one thread at once; every forged crossing fails."""
    root, question = await ask(slack_bot, fake_openai, RESTART, ("ops__restart", {"name": "api"}))
    [card] = await wait_cards(fake_slack, root, 1)
    [approval] = db_rows(Approval)
    question_id = next(
        e["value"] for b in question["blocks"] if b.get("type") == "actions" for e in b["elements"]
    )
    approval_id = next(
        e["value"] for b in card["blocks"] if b.get("type") == "actions" for e in b["elements"]
        if e["action_id"] == APPROVE_ACTION
    )  # fmt: skip
    assert approval.status == "pending"

    # approval buttons aimed at the question (the question's id, its message), by an approver
    for action in (APPROVE_ACTION, REJECT_ACTION):
        await slack_bot.send(forged(question, QUESTION_DECLINE_ACTION, action, question_id,
                                    user="U0LEAD"))  # fmt: skip
    edit = {"type": "modal", "callback_id": EDIT_MODAL, "title": {"type": "plain_text",
            "text": "x"}, "blocks": [], "private_metadata": json.dumps({
                "approval_id": question_id, "team": "T0FAKE", "channel": CHANNEL,
                "thread_ts": root, "card_ts": question["ts"]})}  # fmt: skip
    assert (await submit(slack_bot, edit, {}, user="U0LEAD")) is None
    # question buttons and a question modal aimed at the approval, by its requester
    await slack_bot.send(forged(card, APPROVE_ACTION, QUESTION_DECLINE_ACTION, approval_id,
                                user="U0DEV"))  # fmt: skip
    await slack_bot.send(forged(card, APPROVE_ACTION, QUESTION_ANSWER_ACTION, approval_id,
                                user="U0DEV"))  # fmt: skip
    view = await open_modal(slack_bot, question, user="U0DEV")
    aimed = {**view, "private_metadata": json.dumps({"question_id": approval_id,
             "team": "T0FAKE", "channel": CHANNEL, "thread_ts": root})}  # fmt: skip
    refused = await submit(slack_bot, aimed, state(view, WINDOW), user="U0DEV")
    assert "no such open question" in refused["errors"]["arg:minutes"]
    await fake_slack.wait_for(
        lambda: sum("no such open question" in t for t in ephemeral_to(fake_slack, "U0DEV")) >= 2,
        10,
    )
    [approval] = db_rows(Approval)
    assert approval.status == "pending" and ops_api.calls == []
    assert "Answer" in json.dumps(question_message(fake_slack, root)["blocks"])
    assert tool_results(fake_openai) == {}

    # the approver approves on the card: the question stays open
    await slack_bot.click(card, APPROVE_ACTION, user="U0LEAD")
    await fake_slack.wait_for(lambda: db_rows(Approval)[0].status == "approved", 15)
    assert has_action(question_message(fake_slack, root), QUESTION_ANSWER_ACTION)
    assert await submit(slack_bot, view, state(view, WINDOW), user="U0DEV") is None
    await slack_bot.wait_idle()
    assert WINDOW_TEXT in tool_results(fake_openai).values()
    assert ops_api.restarts == ["api"]
    [approval] = db_rows(Approval)
    assert approval.tool_name == "ops__restart"
    rows = {row.tool_name: row.approval_status for row in db_rows(CallLog)}
    assert rows == {"rich__restart": "not_required", "ops__restart": "approved"}
    assert len(approval_cards(fake_slack, root)) == 1
