"""A tool's question (MCP elicitation) on Slack: a message in the thread with "Answer…" and
"Decline", and the modal "Answer…" opens (one input block per field of the requested schema).

The message shows the server's words as plain text under the connector's name, never as the
bot's or as an approval: its buttons carry only the question's own id, under action ids no
approval listener takes. Once the question ends the buttons go and the message says how.
The modal's inputs are the edit modal's (`arg:<name>` blocks, `edit_modal.field_element`), so
a submission is read back and refused per block the same way.
"""

from __future__ import annotations

import json
from typing import Any

from bot.chat.questions import QuestionView
from bot.surfaces.slack.edit_modal import BLOCK_ID_MAX, block_id, field_element
from bot.surfaces.slack.markdown import escape
from bot.surfaces.slack.render import SlackMessage, context, cut, mention_list, plain, user_mention

QUESTION_ANSWER_ACTION = "chatops_question_answer"
QUESTION_DECLINE_ACTION = "chatops_question_decline"
QUESTION_MODAL = "chatops_question_modal"
QUESTION_BLOCK = "chatops_question"
_ENDED = {"accepted": "Answered", "declined": "Declined"}


def _ending(view: QuestionView) -> str:
    if view.state == "cancelled":
        return ":heavy_multiplication_x: Cancelled: no answer in time, or the run was stopped."
    verb = _ENDED.get(view.state, view.state)
    icon = ":white_check_mark:" if view.state == "accepted" else ":no_entry_sign:"
    return f"{icon} {verb} by {user_mention(view.answered_by)}."


def render_question(view: QuestionView) -> SlackMessage:
    """The question message; while it is open, its "Answer…" and "Decline" buttons."""
    asker = escape(view.asker)
    blocks: list[dict[str, Any]] = [
        context(f":speech_balloon: The *{asker}* connector asks (a question, not an approval):"),
        {"type": "section", "text": plain(cut(view.message or "(no message)", 3000))},
    ]
    if view.state == "open":
        blocks.append(context(f"Only {mention_list(view.requesters)} may answer."))
        answer = {"type": "button", "action_id": QUESTION_ANSWER_ACTION, "style": "primary",
                  "text": plain("Answer\u2026"), "value": view.question_id}  # fmt: skip
        decline = {"type": "button", "action_id": QUESTION_DECLINE_ACTION,
                   "text": plain("Decline"), "value": view.question_id}  # fmt: skip
        buttons = {"type": "actions", "block_id": QUESTION_BLOCK, "elements": [answer, decline]}
        blocks.append(buttons)
    else:
        blocks.append(context(_ending(view)))
    text = cut(f"{view.asker} asks: {view.message}", 3000)
    return SlackMessage(text=text, blocks=blocks)


def render_question_modal(view: QuestionView, origin: dict[str, str]) -> dict[str, Any]:
    """The modal of the question's form; `origin` (team, channel, thread) comes back with the
    submission in `private_metadata` with the question's id."""
    blocks: list[dict[str, Any]] = [
        {"type": "context", "elements": [plain(cut(f"{view.asker} asks:", 2000))]},
        {"type": "section", "text": plain(cut(view.message or "(no message)", 3000))},
    ]
    for field in view.fields:
        if len(block_id(field)) > BLOCK_ID_MAX:
            continue  # a name Slack cannot carry: the schema's check says what is missing
        block: dict[str, Any] = {
            "type": "input",
            "block_id": block_id(field),
            "optional": not field.required,
            "label": plain(cut(field.name, 2000)),
            "element": field_element(field),
        }
        if field.description:
            block["hint"] = plain(cut(field.description, 2000))
        blocks.append(block)
    metadata = {"question_id": view.question_id, **origin}
    return {
        "type": "modal",
        "callback_id": QUESTION_MODAL,
        "private_metadata": json.dumps(metadata),
        "title": plain("Answer the question"),
        "submit": plain("Send answer"),
        "close": plain("Not now"),
        "blocks": blocks[:100],
    }
