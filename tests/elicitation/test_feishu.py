"""A tool's question on Feishu: a card JSON 2.0 `form` in the thread (inputs and selects per
field, Send and Decline), answered through encrypted, signed `card.action.trigger` callbacks
carrying `form_value`; checked against the requested schema (the form comes back with the
problems), requesters only, the card updated after; and neither way does a question's answer
decide an approval, nor an approval's click answer a question."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bot.storage.models import Approval, CallLog
from tests.elicitation.conftest import WINDOW_TEXT, calling, tool_results
from tests.fakes.feishu_api import FakeFeishu, FakeMessage
from tests.fakes.feishu_elements import elements_problem
from tests.fakes.openai_server import FakeOpenAI
from tests.feishu.e2e import FeishuBot, status_message, wait_card

RESTART = ("rich__restart", {"service": "api"})
WINDOW = {"q_0": "30", "q_1": "deploy 1.2", "q_2": "approve"}


def question_message(fake: FakeFeishu, root: str) -> FakeMessage | None:
    for message in fake.replies_to(root):
        if message.msg_type == "interactive" and "connector asks" in message.contents[0]:
            return message
    return None


def inputs(card: dict[str, Any]) -> dict[str, dict[str, Any]]:
    [form] = [e for e in card["body"]["elements"] if e.get("tag") == "form"]
    return {e["name"]: e for e in form["elements"] if e.get("tag") in ("input", "select_static")}


async def ask(bot: FeishuBot, fake_openai: FakeOpenAI, *calls) -> tuple[str, FakeMessage]:
    fake_openai.respond_with(calling(*(calls or (RESTART,))))
    event = bot.fake.message_event("restart the api", user="ou_dev")
    root = event["event"]["message"]["message_id"]
    await bot.send(event)
    return root, await bot.fake.wait_for(lambda f: question_message(f, root), 60)


async def test_a_requester_answers_in_the_form_checked_against_the_schema(
    feishu_bot: FeishuBot, fake_feishu: FakeFeishu, fake_openai: FakeOpenAI
) -> None:
    root, question = await ask(feishu_bot, fake_openai)
    card = question.content
    assert card["schema"] == "2.0" and "When may api restart?" in json.dumps(card)
    fields = inputs(card)
    assert list(fields) == ["q_0", "q_1", "q_2"]
    assert fields["q_2"]["tag"] == "select_static"
    assert [o["value"] for o in fields["q_2"]["options"]] == ["approve", "reject"]

    send = fake_feishu.question_action
    _status, eve = await feishu_bot.send(send(question.message_id, "accept", user="ou_eve",
                                              form_value=WINDOW))  # fmt: skip
    assert (
        eve["toast"]["type"] == "error" and "Only the people who asked" in eve["toast"]["content"]
    )
    assert "card" not in eve

    bad = {**WINDOW, "q_0": "500"}
    _status, refused = await feishu_bot.send(send(question.message_id, "accept", user="ou_dev",
                                                  form_value=bad))  # fmt: skip
    assert refused["toast"]["type"] == "error" and "minutes" in refused["toast"]["content"]
    again = refused["card"]["data"]
    assert elements_problem(json.dumps(again)) is None
    assert inputs(again)["q_0"]["default_value"] == "500"  # as typed, with the problem under it
    assert "500 is greater than the maximum of 120" in json.dumps(again)
    assert tool_results(fake_openai) == {}

    _status, done = await feishu_bot.send(send(question.message_id, "accept", user="ou_dev",
                                               card=again, form_value=WINDOW))  # fmt: skip
    assert done["toast"]["type"] == "success", done
    assert "Answered by" in json.dumps(done["card"]["data"])
    assert "form" not in json.dumps(done["card"]["data"]["body"])
    await feishu_bot.wait_idle()
    assert list(tool_results(fake_openai).values()) == [WINDOW_TEXT]
    assert "Question answered" in json.dumps(question.content)  # patched in place too
    _status, late = await feishu_bot.send(send(question.message_id, "decline", user="ou_dev",
                                               card=card))  # fmt: skip
    assert "no such open question" in late["toast"]["content"]


async def test_decline_reaches_the_server(
    feishu_bot: FeishuBot, fake_feishu: FakeFeishu, fake_openai: FakeOpenAI
) -> None:
    _root, question = await ask(feishu_bot, fake_openai)
    _status, done = await feishu_bot.send(
        fake_feishu.question_action(question.message_id, "decline", user="ou_dev")
    )
    assert done["toast"]["type"] == "success" and "Declined by" in json.dumps(done["card"])
    await feishu_bot.wait_idle()
    assert list(tool_results(fake_openai).values()) == ["restart of api: decline"]


async def test_stop_cancels_the_question_and_its_card_says_so(
    feishu_bot: FeishuBot, fake_feishu: FakeFeishu, fake_openai: FakeOpenAI
) -> None:
    root, question = await ask(feishu_bot, fake_openai)
    card = question.content
    status = status_message(fake_feishu, root)
    _status, stopped = await feishu_bot.send(
        fake_feishu.control_action(status.message_id, "stop", user="ou_dev")
    )
    assert stopped["toast"]["type"] == "success", stopped
    await fake_feishu.wait_for(lambda f: "Question cancelled" in question.contents[-1], 30)
    await feishu_bot.wait_idle()
    _status, late = await feishu_bot.send(
        fake_feishu.question_action(question.message_id, "accept", user="ou_dev", card=card,
                                    form_value=WINDOW)
    )  # fmt: skip
    assert "no such open question" in late["toast"]["content"]
    assert elements_problem(question.contents[-1]) is None


@pytest.mark.both_databases
async def test_question_and_approval_never_answer_each_other(
    feishu_bot: FeishuBot, fake_feishu: FakeFeishu, fake_openai: FakeOpenAI, ops_api, db_rows
) -> None:
    root, question = await ask(feishu_bot, fake_openai, RESTART, ("ops__restart", {"name": "api"}))
    card = await wait_card(fake_feishu, root, pending=True)
    [approval] = db_rows(Approval)
    assert approval.status == "pending"
    approve = next(
        b for b in _buttons(card.content) if b["behaviors"][0]["value"].get("decision") == "approve"
    )
    approval_id = approve["behaviors"][0]["value"]["approval_id"]
    question_id = _buttons(question.content)[0]["behaviors"][0]["value"]["question_id"]
    send = fake_feishu.question_action

    # the approver presses the question's buttons with an approval's value (and both at once)
    for value in (
        {"approval_id": question_id, "decision": "approve"},
        {"approval_id": approval_id, "decision": "approve", "question_id": question_id,
         "question": "decline"},
        {"question_id": approval_id, "question": "accept"},
    ):  # fmt: skip
        _status, answer = await feishu_bot.send(send(question.message_id, "accept",
                                                     user="ou_lead", value=value,
                                                     form_value={}))  # fmt: skip
        assert answer["toast"]["type"] == "error", (value, answer)
    # the requester presses the approval card with a question's value, and the question's
    # Send aimed at the approval
    aimed = {"question_id": approval_id, "question": "decline"}
    _status, answer = await feishu_bot.send(
        send(card.message_id, "decline", user="ou_dev", card=question.content, value=aimed)
    )
    assert "no such open question" in answer["toast"]["content"]
    [approval] = db_rows(Approval)
    assert approval.status == "pending" and ops_api.calls == []
    assert question_message(fake_feishu, root).content["body"]["elements"][-1]["tag"] == (
        "column_set"
    )  # still open: its Decline button
    assert tool_results(fake_openai) == {}

    # the approver approves on the card: the question stays open; then it is answered
    _status, decided = await feishu_bot.click(card, "approve", user="ou_lead")
    assert decided["toast"]["type"] == "success", decided
    assert "Question from" in json.dumps(question_message(fake_feishu, root).content)
    _status, done = await feishu_bot.send(send(question.message_id, "accept", user="ou_dev",
                                               form_value=WINDOW))  # fmt: skip
    assert done["toast"]["type"] == "success"
    await feishu_bot.wait_idle()
    assert WINDOW_TEXT in tool_results(fake_openai).values()
    assert ops_api.restarts == ["api"]
    rows = {row.tool_name: row.approval_status for row in db_rows(CallLog)}
    assert rows == {"rich__restart": "not_required", "ops__restart": "approved"}


def _buttons(card: dict[str, Any]) -> list[dict[str, Any]]:
    found, stack = [], [card]
    while stack:
        node = stack.pop(0)
        if isinstance(node, dict):
            if node.get("tag") == "button":
                found.append(node)
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return found


def test_the_fake_refuses_forms_feishu_refuses() -> None:
    submit = {"tag": "button", "name": "b", "text": {"tag": "plain_text", "content": "Go"},
              "form_action_type": "submit"}  # fmt: skip
    field = {"tag": "input", "name": "a"}

    def card(*elements: dict[str, Any]) -> str:
        return json.dumps({"schema": "2.0", "body": {"elements": list(elements)}})

    assert elements_problem(card({"tag": "form", "name": "f", "elements": [field, submit]})) is None
    assert "no name" in elements_problem(card({"tag": "form", "elements": [field, submit]}))
    assert "unique" in elements_problem(
        card({"tag": "form", "name": "f", "elements": [field, field, submit]})
    )
    assert "submit" in elements_problem(card({"tag": "form", "name": "f", "elements": [field]}))
    assert "outside a form" in elements_problem(card(submit))
