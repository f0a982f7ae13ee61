"""A tool's question (MCP elicitation) as a Feishu card: card JSON 2.0 with a `form` of one
input per field of the requested schema (`q_<i>`, in the form's order), a Send button that
submits it and a Decline button; once the question ends, the card says how, with no form.

The server's words are shown as plain text under the connector's name, never as the bot's or
as an approval: the buttons carry only the question's own id (`question_id`, `question`), never
an approval's keys, so the approval callbacks never take them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.chat.forms import GENERAL
from bot.chat.questions import QuestionView
from bot.surfaces.feishu.edit_card import INPUT_MAX
from bot.surfaces.feishu.render import at, card_frame, cut, markdown_element, plain_text

FIELD = "q_{}"
QUESTION_KEY = "question_id"  # a question button's value names its question by this key
ACTION_KEY = "question"  # ... and what it does: accept or decline
_ENDED = {
    "accepted": ("Question answered", "green", "\u2705 Answered by {}."),
    "declined": ("Question declined", "grey", "\u26d4 Declined by {}."),
    "cancelled": ("Question cancelled", "grey",
                  "Cancelled: no answer in time, or the run was stopped."),
}  # fmt: skip


def _input(kind: str, options: tuple[str, ...], name: str, value: str) -> dict[str, Any]:
    if kind in ("choice", "boolean") and options:
        element: dict[str, Any] = {
            "tag": "select_static",
            "name": name,
            "options": [{"text": plain_text(cut(o, 100)), "value": o} for o in options],
        }
        if value in options:
            element["initial_option"] = value
        return element
    element = {"tag": "input", "name": name, "max_length": INPUT_MAX,
               "placeholder": plain_text("JSON" if kind == "json" else kind)}  # fmt: skip
    if value:
        element["default_value"] = value
    return element


def _button(label: str, kind: str, value: dict[str, Any], name: str, *, submit: bool) -> dict:
    button: dict[str, Any] = {
        "tag": "button",
        "name": name,
        "text": plain_text(label),
        "type": kind,
        "behaviors": [{"type": "callback", "value": value}],
    }
    if submit:
        button["form_action_type"] = "submit"
    return {"tag": "column", "width": "auto", "elements": [button]}  # fmt: skip


def field_names(view: QuestionView) -> dict[str, str]:
    """Each field's input name in the form (`q_<i>`), by field name."""
    return {field.name: FIELD.format(i) for i, field in enumerate(view.fields)}


def question_card(
    view: QuestionView,
    *,
    errors: Mapping[str, str] | None = None,
    typed: Mapping[str, str | None] | None = None,
) -> dict[str, Any]:
    """The card; `errors` by field and `typed` (what was sent, shown again) for a refused
    answer."""
    elements: list[dict[str, Any]] = [
        {"tag": "div", "text": plain_text(f"The {view.asker} connector asks (not an approval):")},
        {"tag": "div", "text": plain_text(cut(view.message or "(no message)", 2000))},
    ]
    if view.state != "open":
        title, template, ending = _ENDED[view.state]
        elements.append(markdown_element(ending.format(at(view.answered_by))))
        return card_frame(f"{title}: {cut(view.asker, 60)}", template, elements)
    who = ", ".join(at(r) for r in view.requesters)
    elements.append(markdown_element(f"Only {who} may answer."))
    errors = errors or {}
    if errors.get(GENERAL):
        elements.append({"tag": "div", "text": plain_text("\u26a0\ufe0f " + errors[GENERAL])})
    fields: list[dict[str, Any]] = []
    names = field_names(view)
    for field in view.fields:
        value = (typed or {}).get(field.name) or field.value
        label = field.name + (" (required)" if field.required else "")
        if field.description:
            label += f": {field.description}"
        fields.append({"tag": "div", "text": plain_text(cut(label, 500))})
        fields.append(_input(field.kind, field.options, names[field.name], value[:INPUT_MAX]))
        if field.name in errors:
            fields.append({"tag": "div", "text": plain_text("\u26a0\ufe0f " + errors[field.name])})
    qid = view.question_id
    send = {QUESTION_KEY: qid, ACTION_KEY: "accept"}
    fields.append({"tag": "column_set", "flex_mode": "flow", "columns": [
        _button("Send answer", "primary_filled", send, f"question_accept__{qid}", submit=True),
    ]})  # fmt: skip
    elements.append({"tag": "form", "name": "question_form", "elements": fields})
    decline = {QUESTION_KEY: qid, ACTION_KEY: "decline"}
    elements.append({"tag": "column_set", "flex_mode": "flow", "columns": [
        _button("Decline", "default", decline, f"question_decline__{qid}", submit=False),
    ]})  # fmt: skip
    return card_frame(f"Question from {cut(view.asker, 60)}", "wathet", elements)
