"""Feishu card callbacks of a tool's question (MCP elicitation): the form's Send (an accept,
with the form's values) and Decline, for the verified operator.

The elicitation feature (`Questions` port) decides who may answer (the run's requesters) and
checks the values against the requested schema: a refused answer comes back as the form again
with the problems under their fields (and a toast), an accepted or declined one as the card in
its ended state. Nothing here reaches the approval broker, whatever the callback carries.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from lark_oapi.event.callback.model.p2_card_action_trigger import (
    P2CardActionTrigger,
    P2CardActionTriggerResponse,
)

from bot.chat.questions import ACTIONS, QuestionAction, Questions, QuestionView
from bot.surfaces.feishu.events import PLATFORM
from bot.surfaces.feishu.inbound import LoopBridge, card_response
from bot.surfaces.feishu.question_card import ACTION_KEY, QUESTION_KEY, field_names, question_card
from bot.surfaces.feishu.render import toast

log = logging.getLogger(__name__)

_NAME_PREFIX = (
    "question_"  # a form submit may carry only its button's name: question_<action>__<id>
)
_ENDED = {"accept": "accepted", "decline": "declined"}


def question_click(data: P2CardActionTrigger) -> tuple[str, QuestionAction, str] | None:
    """(question id, action, operator) when the callback is a question's button, else None
    (an approval's, a Stop, a rating: not this feature's). A value that names a question is
    this feature's alone, whatever else it carries."""
    event = data.event
    if event is None or event.action is None:
        return None
    value: Any = event.action.value or {}
    name = event.action.name if isinstance(event.action.name, str) else ""
    question_id = value.get(QUESTION_KEY) if isinstance(value, dict) else None
    action = value.get(ACTION_KEY) if isinstance(value, dict) else None
    if question_id is None and name.startswith(_NAME_PREFIX):
        action, _, question_id = name.removeprefix(_NAME_PREFIX).partition("__")
    if question_id is None and not (isinstance(value, dict) and ACTION_KEY in value):
        return None
    operator = event.operator.open_id if event.operator is not None else None
    valid = isinstance(question_id, str) and action in ACTIONS and action != "cancel"
    return (str(question_id), action, str(operator or "")) if valid else ("", "cancel", "")


class FeishuQuestions:
    """Answers a question's card buttons through the `Questions` port (see the docstring)."""

    def __init__(self, bridge: LoopBridge, questions: Questions | None, budget_s: float) -> None:
        self._bridge = bridge
        self._questions = questions
        self._budget = budget_s

    def handle(
        self, data: P2CardActionTrigger, click: tuple[str, QuestionAction, str]
    ) -> P2CardActionTriggerResponse:
        question_id, action, user = click
        if self._questions is None or not (question_id and user) or action == "cancel":
            return card_response(toast("error", "This button is not a question's answer."))
        form_value: Any = data.event.action.form_value if data.event and data.event.action else {}
        if not isinstance(form_value, dict):
            form_value = {}
        try:
            return self._answer(question_id, action, user, form_value)
        except Exception:
            log.exception("feishu: answering question %s failed", question_id)
            return card_response(toast("error", "Your answer could not be sent; try again."))

    def _answer(
        self, question_id: str, action: QuestionAction, user: str, form_value: dict[str, Any]
    ) -> P2CardActionTriggerResponse:
        assert self._questions is not None
        questions = self._questions
        form = self._bridge.schedule(questions.form(question_id, user, platform=PLATFORM))
        view = form.result(self._budget)
        if not isinstance(view, QuestionView):
            return card_response(toast("error", view.message))
        values: dict[str, str | None] = {}
        if action == "accept":
            for field, name in field_names(view).items():
                typed = form_value.get(name)
                values[field] = typed if isinstance(typed, str) and typed != "" else None
        answered = questions.answer(question_id, user, action, values, platform=PLATFORM)
        result = self._bridge.schedule(answered).result(self._budget)
        if result.status == "invalid":
            card = question_card(view, errors=result.errors, typed=values)
            return card_response(toast("error", "Not sent: " + result.message), card)
        if result.status != "answered":
            return card_response(toast("error", result.message))
        ended = replace(view, state=_ENDED[action], answered_by=user)  # type: ignore[arg-type]
        return card_response(toast("success", result.message), question_card(ended))
