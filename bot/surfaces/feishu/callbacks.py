"""Feishu card callbacks (`card.action.trigger`): approval decisions, Stop, feedback, a tool's
question (its own handler, `question_callbacks.py`, taken first: never a decision), and the
edit form ("Edit, then approve" shows it in place of the card; "Back" shows the card again; a
refused edit shows it again with the problems, nothing decided; `edit_card.py`).

Each runs on an SDK thread and answers within Feishu's three seconds with a toast (and, for an
approval, the updated card). The clicker is the verified callback's `operator`; the card is the
callback's `context.open_message_id`. An approval click is stored in the inbox before the answer
and then waits (within the budget) for the broker; a Stop is decided by the run manager's `stop`
port, which finds the run from the status message clicked; a feedback click is stored in the
inbox, to be recorded on the run whose answer card was clicked.
"""

from __future__ import annotations

import concurrent.futures
import logging
import time
from typing import Any

from lark_oapi.event.callback.model.p2_card_action_trigger import (
    P2CardActionTrigger,
    P2CardActionTriggerResponse,
)

from bot.chat.controls import RATINGS, FeedbackClick, StopRequest
from bot.chat.decisions import DecisionRecord
from bot.chat.forms import EditForm
from bot.chat.ports import Decisions, InboxPort, Stop
from bot.chat.questions import Questions
from bot.chat.threads import MessageRef, ThreadRef
from bot.surfaces.feishu.agent_cards import CONTROL_KEY
from bot.surfaces.feishu.batch_card import any_card
from bot.surfaces.feishu.edit_card import edit_form_card, submitted_values
from bot.surfaces.feishu.events import PLATFORM, CardDecision, parse_card_action
from bot.surfaces.feishu.inbound import LoopBridge, card_response, within
from bot.surfaces.feishu.question_callbacks import FeishuQuestions, question_click
from bot.surfaces.feishu.render import approval_card, toast

log = logging.getLogger(__name__)

_TOAST_KIND = {"decided": "success", "recorded": "success", "already_decided": "info"}


def _control(data: P2CardActionTrigger) -> tuple[str, str, MessageRef, dict[str, Any]] | None:
    """(what was pressed, who, the card clicked, the value) for a Stop or feedback button."""
    event = data.event
    if event is None or event.action is None or event.operator is None:
        return None
    value: Any = event.action.value or {}
    control = value.get(CONTROL_KEY) if isinstance(value, dict) else None
    context = event.context
    message_id = context.open_message_id if context is not None else None
    chat_id = context.open_chat_id if context is not None else None
    tenant = data.header.tenant_key if data.header is not None else None
    user = event.operator.open_id
    if control not in ("stop", "feedback"):
        return None
    if not all(isinstance(v, str) and v for v in (message_id, chat_id, tenant, user)):
        return None
    thread = ThreadRef(PLATFORM, str(tenant), str(chat_id), "")
    return str(control), str(user), MessageRef(thread, str(message_id)), value


class FeishuCallbacks:
    """The surface's `card.action.trigger` handler (see the module docstring)."""

    def __init__(
        self,
        bridge: LoopBridge,
        inbox: InboxPort,
        stop: Stop | None,
        budget_s: float,
        decisions: Decisions | None = None,
        questions: Questions | None = None,
    ) -> None:
        """`decisions`: the broker (the edit form, an edit checked); without it nothing can be
        edited here. `questions`: where a tool's question is answered (`question_callbacks`)."""
        self._questions = FeishuQuestions(bridge, questions, budget_s)
        self._bridge = bridge
        self._inbox = inbox
        self._stop = stop
        self._budget = budget_s
        self._decisions = decisions

    def handle(self, data: P2CardActionTrigger) -> P2CardActionTriggerResponse:
        question = question_click(data)
        if question is not None:  # a question's button: never an approval's decision
            return self._questions.handle(data, question)
        control = _control(data)
        if control is not None:
            kind, user, message, value = control
            if kind == "stop":
                return self._on_stop(user, message)
            return self._on_feedback(user, message, value)
        return self._on_decision(data)

    def _on_stop(self, user: str, message: MessageRef) -> P2CardActionTriggerResponse:
        if self._stop is None:
            return card_response(toast("error", "Stop is not available here."))
        request = StopRequest(platform=PLATFORM, user_id=user, message=message)
        try:
            result = self._bridge.schedule(self._stop(request)).result(self._budget)
        except Exception:
            log.exception("feishu: a stop click failed")
            return card_response(toast("error", "The run could not be stopped; try again."))
        kind = "success" if result.status == "stopping" else "info"
        return card_response(toast(kind, result.message))

    def _on_feedback(
        self, user: str, message: MessageRef, value: dict[str, Any]
    ) -> P2CardActionTriggerResponse:
        rating = value.get("rating")
        if rating not in RATINGS:
            return card_response(toast("error", "This button is not a rating."))
        click = FeedbackClick(platform=PLATFORM, user_id=user, rating=rating, message=message)
        try:
            self._bridge.schedule(self._inbox.accept_feedback(click)).result(self._budget)
        except Exception:
            log.exception("feishu: storing a feedback click failed")
            return card_response(toast("error", "Your feedback could not be recorded; try again."))
        return card_response(toast("success", "Thanks for the feedback."))

    def _on_decision(self, data: P2CardActionTrigger) -> P2CardActionTriggerResponse:
        """An approval card's button: the broker decides for the verified operator."""
        click = parse_card_action(data)
        if click is None:
            return card_response(toast("error", "This button is not an approval decision."))
        arguments: dict[str, Any] | None = None
        fingerprint = ""
        if click.decision in ("edit", "back"):
            return self._on_edit_control(click)
        if click.decision == "request_changes" and not click.reason:
            return card_response(toast("error", "Write what the agent should do instead first."))
        if click.decision == "approve_edited":
            checked = self._check_edit(click)
            if not isinstance(checked, dict):
                return checked
            arguments, fingerprint = checked, str(click.value.get("fingerprint") or "")
        record = DecisionRecord(
            platform=PLATFORM,
            approval_id=click.approval_id,
            user_id=click.operator_id,
            decision=click.decision,  # type: ignore[arg-type] - parse_card_action checked it
            reason=click.reason,
            card=click.card(),
            arguments=arguments,
            fingerprint=fingerprint,
        )
        deadline = time.monotonic() + self._budget
        try:
            stored = self._bridge.schedule(self._inbox.accept_decision(record)).result(self._budget)
        except Exception:
            log.exception("storing the decision on approval %s failed", click.approval_id)
            return card_response(toast("error", "Your answer could not be recorded; try again."))
        try:
            result = self._bridge.schedule(within(stored, deadline - time.monotonic())).result()
        except (TimeoutError, concurrent.futures.TimeoutError):
            return card_response(
                toast("info", "Your answer is recorded; the card will update shortly.")
            )
        except Exception:
            log.exception("deciding approval %s failed", click.approval_id)
            return card_response(toast("info", "Your answer is recorded; it will be applied."))
        kind = _TOAST_KIND.get(result.status, "error")
        shown = result.card  # the batch card, when the approval's card lists its batch
        card = any_card(shown) if shown is not None and kind != "error" else None
        return card_response(toast(kind, result.message), card)

    def _on_edit_control(self, click: CardDecision) -> P2CardActionTriggerResponse:
        """ "Edit, then approve": the form in place of the card (for someone who may approve);
        "Back": the approval card as it stands."""
        if self._decisions is None:
            return card_response(toast("error", "Editing is not available here."))
        try:
            if click.decision == "back":
                view = self._bridge.schedule(self._decisions.view(click.approval_id))
                shown = view.result(self._budget)
                card = approval_card(shown) if shown is not None else None
                return card_response(toast("info", "Nothing was decided."), card)
            asked = self._decisions.edit_form(
                click.approval_id, click.operator_id, platform=PLATFORM, click=click.card()
            )
            form = self._bridge.schedule(asked).result(self._budget)
        except Exception:
            log.exception("feishu: opening the edit form of %s failed", click.approval_id)
            return card_response(toast("error", "The form could not be opened; try again."))
        if not isinstance(form, EditForm):
            return card_response(toast("error", form.message))
        return card_response(
            toast("info", "Edit the arguments, then approve."), edit_form_card(form)
        )

    def _check_edit(self, click: CardDecision) -> dict[str, Any] | P2CardActionTriggerResponse:
        """The edited arguments, or the form again with what is wrong (nothing decided)."""
        if self._decisions is None:
            return card_response(toast("error", "Editing is not available here."))
        values = submitted_values(click.form, click.value.get("fields"))
        base = str(click.value.get("fingerprint") or "")
        try:
            checked = self._bridge.schedule(self._decisions.check_edit(
                click.approval_id, click.operator_id, values, fingerprint=base,
                platform=PLATFORM, click=click.card(),
            )).result(self._budget)  # fmt: skip
            if checked.ok and checked.arguments is not None:
                return dict(checked.arguments)
            asked = self._decisions.edit_form(
                click.approval_id, click.operator_id, platform=PLATFORM, click=click.card()
            )
            form = self._bridge.schedule(asked).result(self._budget)
        except Exception:
            log.exception("feishu: checking an edit of %s failed", click.approval_id)
            return card_response(toast("error", "Your edit could not be checked; try again."))
        message = "Your edit was not applied: " + checked.message()
        if not isinstance(form, EditForm):
            return card_response(toast("error", message))
        card = edit_form_card(form, errors=checked.errors, typed=values)
        return card_response(toast("error", message), card)
