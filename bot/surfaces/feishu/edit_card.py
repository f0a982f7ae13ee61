"""The "Edit, then approve" form card: an approval's edit form as a card JSON 2.0 `form`, shown
in place of the approval card when an approver presses "Edit, then approve", and a submission
read back as text per argument.

One input per argument (`arg_<i>`; the submit button's value lists the argument names in that
order): text and JSON are `input`s (multi-line for JSON and long text), a boolean or an `enum` a
`select_static`. An argument too long for Feishu's inputs is not offered and is kept as it is.
A refused edit comes back as the same card with the problems under their fields (and a toast):
nothing was decided. "Back" shows the approval card again.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.chat.forms import GENERAL, EditForm, FormField
from bot.surfaces.feishu.render import card_frame, cut, plain_text

INPUT_MAX = 1_000  # Feishu's input max_length
FIELD = "arg_{}"


def offered(field: FormField) -> bool:
    return len(field.value) <= INPUT_MAX


def _input(field: FormField, name: str, value: str) -> dict[str, Any]:
    if field.kind in ("choice", "boolean") and field.options:
        element: dict[str, Any] = {
            "tag": "select_static",
            "name": name,
            "options": [{"text": plain_text(cut(o, 100)), "value": o} for o in field.options],
        }
        if value in field.options:
            element["initial_option"] = value
        return element
    hint = "JSON" if field.kind == "json" else field.kind
    element = {"tag": "input", "name": name, "max_length": INPUT_MAX}
    element["placeholder"] = plain_text(hint)
    if value:
        element["default_value"] = value
    if field.multiline:
        element["input_type"] = "multiline_text"
        element["rows"] = 4
    return element


def _button(label: str, kind: str, value: dict[str, Any], name: str) -> dict[str, Any]:
    return {
        "tag": "column",
        "width": "auto",
        "elements": [
            {
                "tag": "button",
                "name": name,
                "text": plain_text(label),
                "type": kind,
                "form_action_type": "submit",
                "behaviors": [{"type": "callback", "value": value}],
            }
        ],
    }


def edit_form_card(
    form: EditForm,
    *,
    errors: Mapping[str, str] | None = None,
    typed: Mapping[str, str | None] | None = None,
) -> dict[str, Any]:
    """The form card; `errors` by argument (a refused edit) and `typed` (what was submitted,
    shown again) when it comes back."""
    errors = errors or {}
    elements: list[dict[str, Any]] = [{"tag": "div", "text": plain_text(form.note)}]
    if errors.get(GENERAL):
        elements.append({"tag": "div", "text": plain_text("\u26a0\ufe0f " + errors[GENERAL])})
    fields: list[dict[str, Any]] = []
    names: list[str] = []
    kept: list[str] = []
    for field in form.fields:
        if not offered(field):
            kept.append(field.name)
            continue
        name = FIELD.format(len(names))
        names.append(field.name)
        value = field.value
        if typed is not None and field.name in typed:
            value = typed[field.name] or ""
        label = field.name + (" (required)" if field.required else "")
        fields.append({"tag": "div", "text": plain_text(label)})
        fields.append(_input(field, name, value))
        if field.name in errors:
            fields.append({"tag": "div", "text": plain_text("\u26a0\ufe0f " + errors[field.name])})
    if kept:
        note = f"Too long to edit here, kept as they are: {', '.join(kept)}"
        elements.append({"tag": "div", "text": plain_text(cut(note, 500))})
    submit = {"approval_id": form.approval_id, "decision": "approve_edited",
              "fingerprint": form.fingerprint, "fields": names}  # fmt: skip
    back = {"approval_id": form.approval_id, "decision": "back"}
    buttons = [
        _button("Approve edited", "primary_filled", submit, f"approve_edited__{form.approval_id}"),
        _button("Back", "default", back, f"back__{form.approval_id}"),
    ]
    fields.append({"tag": "column_set", "flex_mode": "flow", "columns": buttons})
    elements.append({"tag": "form", "name": "edit_form", "elements": fields})
    return card_frame(form.title, "blue", elements)


def submitted_values(form: Mapping[str, Any], names: Any) -> dict[str, str | None]:
    """Text per argument from a submitted form's values (`names`: the button's list, in the
    order of the `arg_<i>` inputs; an empty input is None)."""
    if not isinstance(names, list):
        return {}
    found: dict[str, str | None] = {}
    for i, name in enumerate(names):
        key = FIELD.format(i)
        if isinstance(name, str) and key in form:
            value = form[key]
            found[name] = value if isinstance(value, str) and value != "" else None
    return found
