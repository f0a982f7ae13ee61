"""The "Edit, then approve" modal: an approval's edit form as Block Kit inputs, and a submission
read back as text per argument.

One input block per argument (its `block_id` names it: `arg:<name>`): a text or JSON argument
is a `plain_text_input` (multi-line for JSON and long text), a number a `number_input`, a
boolean or an `enum` a `static_select`. An argument too long for Slack's inputs is not offered:
the modal says so, and it is kept as it is. Problems with a submission go back to Slack as a
`response_action: errors` reply on the blocks they are about, so the approver reads them inside
the modal and nothing is decided.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from bot.chat.forms import GENERAL, EditForm, FormField
from bot.surfaces.slack.render import Blocks, cut

EDIT_MODAL = "chatops_edit_modal"
FIELD_PREFIX = "arg:"
VALUE = "value"  # every input's action_id
INPUT_MAX = 3_000  # plain_text_input's max_length and initial_value
OPTIONS_MAX = 100
OPTION_VALUE_MAX = 150
BLOCK_ID_MAX = 255


def _plain(text: str) -> dict[str, Any]:
    return {"type": "plain_text", "text": text or " "}


def field_element(field: FormField) -> dict[str, Any]:
    selectable = (
        field.kind in ("choice", "boolean")
        and 0 < len(field.options) <= OPTIONS_MAX
        and all(0 < len(o) <= OPTION_VALUE_MAX for o in field.options)
    )
    if selectable:
        options = [{"text": _plain(cut(o, 75)), "value": o} for o in field.options]
        element: dict[str, Any] = {"type": "static_select", "action_id": VALUE, "options": options}
        chosen = next((o for o in options if o["value"] == field.value), None)
        if chosen is not None:
            element["initial_option"] = chosen
        return element
    if field.kind in ("number", "integer"):
        element = {"type": "number_input", "action_id": VALUE,
                   "is_decimal_allowed": field.kind == "number"}  # fmt: skip
    else:
        element = {"type": "plain_text_input", "action_id": VALUE, "max_length": INPUT_MAX}
        if field.multiline:
            element["multiline"] = True
    if field.value:
        element["initial_value"] = field.value
    return element


def block_id(field: FormField) -> str:
    return FIELD_PREFIX + field.name


def offered(field: FormField) -> bool:
    """Slack can show it: its value fits an input and its name a block id."""
    return len(field.value) <= INPUT_MAX and len(block_id(field)) <= BLOCK_ID_MAX


def render_edit_modal(form: EditForm, origin: dict[str, str]) -> dict[str, Any]:
    """The modal; `origin` says where the card lives (the submission is checked against it)."""
    blocks: Blocks = [
        {"type": "context", "elements": [_plain(cut(f"{form.title}. {form.note}", 2000))]}
    ]
    kept = []
    for field in form.fields:
        if not offered(field):
            kept.append(field.name)
            continue
        block: dict[str, Any] = {
            "type": "input",
            "block_id": block_id(field),
            "optional": not field.required,
            "label": _plain(cut(field.name, 2000)),
            "element": field_element(field),
        }
        hint = field.description or ("JSON" if field.kind == "json" else "")
        if hint:
            block["hint"] = _plain(cut(hint, 2000))
        blocks.append(block)
    if kept:
        note = f"Too long to edit here, kept as they are: {', '.join(kept)}"
        blocks.append({"type": "context", "elements": [_plain(cut(note, 2000))]})
    metadata = {"approval_id": form.approval_id, **origin, "fingerprint": form.fingerprint}
    return {
        "type": "modal",
        "callback_id": EDIT_MODAL,
        "private_metadata": json.dumps(metadata),
        "title": _plain("Edit, then approve"),
        "submit": _plain("Approve edited"),
        "close": _plain("Cancel"),
        "blocks": blocks[:100],
    }


def submitted_values(values: Mapping[str, Any]) -> dict[str, str | None]:
    """Text per argument from a submitted modal's `state.values` (None: left empty)."""
    found: dict[str, str | None] = {}
    for block, entry in values.items():
        if not isinstance(block, str) or not block.startswith(FIELD_PREFIX):
            continue
        state = entry.get(VALUE) if isinstance(entry, dict) else None
        if not isinstance(state, dict):
            continue
        if state.get("type") == "static_select":
            option = state.get("selected_option")
            value = option.get("value") if isinstance(option, dict) else None
        else:
            value = state.get("value")
        found[block[len(FIELD_PREFIX) :]] = value if isinstance(value, str) else None
    return found


def errors_reply(errors: Mapping[str, str], sent: Mapping[str, Any]) -> dict[str, Any]:
    """The `view_submission` answer that keeps the modal open with each problem on its block
    (a problem of the whole edit on the first input block)."""
    blocks = [b for b in sent if isinstance(b, str) and b.startswith(FIELD_PREFIX)]
    shown: dict[str, str] = {}
    for name, message in errors.items():
        target = FIELD_PREFIX + name if name != GENERAL else ""
        if target not in blocks:
            target = blocks[0] if blocks else ""
        if target:
            shown[target] = cut(f"{shown[target]} {message}" if target in shown else message, 2000)
    return {"response_action": "errors", "errors": shown}
