"""Slack's answers to a tool's question (MCP elicitation): "Answer…" opens the form's modal,
"Decline" declines, and a submitted modal is an accept checked against the requested schema.

The person is always the verified payload's `user.id`; the elicitation feature decides whether
they may answer (the run's requesters only) and checks the values: a refused or invalid
submission comes back inside the modal as `response_action: errors`, a refused click as a
note only the clicker sees. This talks to the `Questions` port only: no approval is stored or
decided here, whatever the payload carries.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from bot.chat.forms import GENERAL
from bot.chat.questions import AnswerResult, Questions, QuestionView
from bot.surfaces.slack.clicks import click_origin, origin_thread
from bot.surfaces.slack.edit_modal import errors_reply, submitted_values
from bot.surfaces.slack.identity import request_team
from bot.surfaces.slack.outbound import SlackSurface
from bot.surfaces.slack.question_card import QUESTION_ANSWER_ACTION, render_question_modal

log = logging.getLogger(__name__)

PLATFORM = "slack"
UNAVAILABLE = "Questions cannot be answered here."
Spawn = Callable[[Coroutine[Any, Any, None], str], None]


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


class SlackQuestions:
    """The question message's buttons and the answer modal (see the module docstring)."""

    def __init__(self, questions: Questions | None, surface: SlackSurface, spawn: Spawn) -> None:
        self.questions = questions
        self.surface = surface
        self.spawn = spawn

    def accept_click(self, body: dict[str, Any], action: dict[str, Any]) -> None:
        """ "Answer…" or "Decline": handled on a task (the ack does not wait for it)."""
        user = body.get("user") if isinstance(body.get("user"), dict) else {}
        question_id, user_id = _str(action.get("value")), _str(user.get("id"))
        if not (question_id and user_id):
            log.warning("slack: a malformed question click was ignored")
            return
        origin = click_origin(body)
        if action.get("action_id") == QUESTION_ANSWER_ACTION:
            trigger = (_str(body.get("trigger_id")), request_team(body))
            work = self._open_form(question_id, user_id, origin, trigger)
        else:
            work = self._decline(question_id, user_id, origin)
        self.spawn(work, f"question {question_id}")

    async def _open_form(
        self, question_id: str, user_id: str, origin: dict[str, str], trigger: tuple[str, str]
    ) -> None:
        """The modal, for one of the requesters (`trigger`: the click's trigger id and team)."""
        if self.questions is None:
            await self._tell(origin, user_id, UNAVAILABLE)
            return
        form = await self.questions.form(question_id, user_id, platform=PLATFORM)
        if not isinstance(form, QuestionView):
            await self._tell(origin, user_id, form.message)
            return
        client = await self.surface.client_for(trigger[1])
        await client.views_open(trigger_id=trigger[0], view=render_question_modal(form, origin))

    async def _decline(self, question_id: str, user_id: str, origin: dict[str, str]) -> None:
        if self.questions is None:
            await self._tell(origin, user_id, UNAVAILABLE)
            return
        result = await self.questions.answer(question_id, user_id, "decline", platform=PLATFORM)
        if result.status != "answered":
            await self._tell(origin, user_id, result.message)

    async def accept_submission(self, body: dict[str, Any]) -> dict[str, Any] | None:
        """The modal was submitted: the answer, or the `response_action: errors` reply that
        keeps the modal open with each problem on its block."""
        view = body.get("view") if isinstance(body.get("view"), dict) else {}
        user = body.get("user") if isinstance(body.get("user"), dict) else {}
        try:
            origin = json.loads(_str(view.get("private_metadata")) or "{}")
        except ValueError:
            origin = None
        user_id = _str(user.get("id"))
        if not isinstance(origin, dict) or not user_id:
            log.warning("slack: a malformed question submission was ignored")
            return None
        origin = {k: v for k, v in origin.items() if isinstance(k, str) and isinstance(v, str)}
        question_id = origin.pop("question_id", "")
        state = view.get("state") if isinstance(view.get("state"), dict) else {}
        values = state.get("values") if isinstance(state.get("values"), dict) else {}
        if self.questions is None:
            result = AnswerResult("not_found", UNAVAILABLE)
        else:
            result = await self.questions.answer(
                question_id, user_id, "accept", submitted_values(values), platform=PLATFORM
            )
        if result.status == "answered":
            return None
        errors = result.errors if result.status == "invalid" else {GENERAL: result.message}
        reply = errors_reply(errors or {GENERAL: result.message}, values)
        if reply["errors"]:
            return reply
        await self._tell(origin, user_id, result.message)  # a form without inputs
        return None

    async def _tell(self, origin: dict[str, str], user_id: str, message: str) -> None:
        """A note only the person sees, in the question's thread."""
        thread = origin_thread(origin)
        if thread is not None:
            await self.surface.notify_user(thread, user_id, message)
