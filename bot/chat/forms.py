"""The edit form of an approval: the tool call's arguments as fields, in no platform's markup.

An approver edits a call's arguments before approving it (`approve_edited`). The approvals
feature builds the form from the tool's JSON Schema (`bot.approvals.forms`); each surface renders
it (a Slack modal, a Feishu form card, a console dialog) and hands back what was typed, field
by field, as text: the approvals feature parses and checks it (`EditCheck`), so every surface
refuses a bad edit with the same words, inside its form.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

# text: a string; number / integer: a JSON number; boolean: true or false (a select);
# choice: one of `options` (a schema `enum`); json: anything else, typed as JSON
FieldKind = Literal["text", "number", "integer", "boolean", "choice", "json"]
GENERAL = ""  # the `EditCheck.errors` key of a problem that belongs to no one field


@dataclass(frozen=True, kw_only=True)
class FormField:
    """One argument: `name` is the argument's; `value` what the form starts with, as text
    (JSON for `json`, "" when the call does not set it); `options` the choices of a `choice`
    or `boolean` (their JSON text)."""

    name: str
    kind: FieldKind
    value: str
    required: bool = False
    description: str = ""
    options: tuple[str, ...] = ()
    multiline: bool = False


@dataclass(frozen=True, kw_only=True)
class EditForm:
    """The form an approver edits a call in. `fingerprint`: the arguments it starts from (the
    submission names it back: an edit made on arguments that changed meanwhile is refused)."""

    approval_id: str
    tool_name: str
    fields: tuple[FormField, ...]
    fingerprint: str
    title: str = ""
    note: str = ""  # what the form says above the fields (who else decides, what happens)


@dataclass(frozen=True)
class EditCheck:
    """A submitted edit, checked: the arguments it makes (when `ok`), or what is wrong with it,
    by field name (`GENERAL` for a problem of the whole edit: the policy, who may approve)."""

    arguments: Mapping[str, object] | None = None
    errors: Mapping[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.arguments is not None and not self.errors

    def message(self) -> str:
        """Every problem in one text (for a surface that shows one line)."""
        return "; ".join(f"{k}: {v}" if k else v for k, v in self.errors.items())
