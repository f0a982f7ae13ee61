"""The edit form of an approval, built from the tool's JSON Schema, and a submission parsed back.

One field per argument: a string is a text input, a number or an integer a number, a boolean and
an `enum` a select, anything else (an object, an array, a union) JSON in a multi-line input.
Arguments the call sets that the schema does not name are fields too (JSON), so nothing is
dropped. What a surface sends back is text per field name; a field it did not send (one too
long for its inputs) keeps its value. The parsed arguments are then checked against the whole
schema, each problem put on its field, so the approver reads it inside the form.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from jsonschema import Draft202012Validator

from bot.chat.forms import GENERAL, EditCheck, FieldKind, FormField
from bot.engine.arguments import UNUSABLE_SCHEMA

LONG_TEXT = 80  # a string longer than this (or with a line break) gets a multi-line input
_SCALAR_KINDS: dict[str, FieldKind] = {
    "string": "text",
    "number": "number",
    "integer": "integer",
    "boolean": "boolean",
}


def _properties(schema: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    found = schema.get("properties")
    if not isinstance(found, Mapping):
        return {}
    return {str(k): v if isinstance(v, Mapping) else {} for k, v in found.items()}


def _kind(prop: Mapping[str, Any]) -> FieldKind:
    enum = prop.get("enum")
    if isinstance(enum, list) and enum and all(_is_scalar(v) for v in enum):
        return "choice"
    kind = prop.get("type")
    return _SCALAR_KINDS.get(kind, "json") if isinstance(kind, str) else "json"


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def option_text(value: Any) -> str:
    """How a choice is shown and sent back: a string as it is, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value)


def _value_text(kind: FieldKind, value: Any) -> str:
    if kind == "text" and isinstance(value, str):
        return value
    if kind == "choice":
        return option_text(value)
    if kind in ("number", "integer", "boolean"):
        return json.dumps(value)
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


def form_fields(schema: Mapping[str, Any], arguments: Mapping[str, Any]) -> tuple[FormField, ...]:
    """The fields of the form over `arguments` (the schema's properties in order, then any other
    argument the call sets); a schema without properties: one JSON field per argument."""
    properties = _properties(schema)
    required = schema.get("required") if isinstance(schema.get("required"), list) else []
    fields: list[FormField] = []
    for name in [*properties, *(k for k in arguments if k not in properties)]:
        prop = properties.get(name, {})
        kind = _kind(prop) if name in properties else "json"
        present = name in arguments
        text = _value_text(kind, arguments[name]) if present else ""
        if kind == "text" and not isinstance(arguments.get(name, ""), str):
            kind, text = "json", _value_text("json", arguments[name])
        options: tuple[str, ...] = ()
        if kind == "choice":
            options = tuple(option_text(v) for v in prop["enum"])
        elif kind == "boolean":
            options = ("true", "false")
        description = prop.get("description") if isinstance(prop.get("description"), str) else ""
        fields.append(
            FormField(
                name=name, kind=kind, value=text, required=name in required,
                description=str(description)[:300], options=options,
                multiline=kind == "json" or "\n" in text or len(text) > LONG_TEXT,
            )
        )  # fmt: skip
    return tuple(fields)


def _parse_one(field: FormField, raw: str, prop: Mapping[str, Any]) -> tuple[Any, str]:
    """(value, problem) of one field's text; the problem is "" when it parsed."""
    if field.kind == "text":
        return raw, ""
    if field.kind == "choice":
        for member in prop.get("enum") or ():
            if option_text(member) == raw:
                return member, ""
        return None, "pick one of " + ", ".join(field.options)
    if field.kind == "boolean":
        if raw.strip() in ("true", "false"):
            return raw.strip() == "true", ""
        return None, "true or false"
    try:
        value = json.loads(raw)
    except ValueError as exc:
        return None, f"not valid JSON ({exc.msg}, line {exc.lineno} column {exc.colno})"
    if field.kind == "integer" and (not isinstance(value, int) or isinstance(value, bool)):
        return None, "a whole number"
    if field.kind == "number" and (not isinstance(value, int | float) or isinstance(value, bool)):
        return None, "a number"
    return value, ""


def parse_edit(
    schema: Mapping[str, Any],
    arguments: Mapping[str, Any],
    values: Mapping[str, str | None],
) -> EditCheck:
    """The arguments an approver's submission makes from the call's `arguments` (a field left
    empty is not set; a field not sent keeps its value), checked against `schema`."""
    properties = _properties(schema)
    edited: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for field in form_fields(schema, arguments):
        if field.name not in values:
            if field.name in arguments:
                edited[field.name] = arguments[field.name]
            continue
        raw = values[field.name]
        if raw is None or (field.kind != "text" and not raw.strip()) or raw == "":
            continue  # an emptied field: the argument is not set
        value, problem = _parse_one(field, raw, properties.get(field.name, {}))
        if problem:
            errors[field.name] = problem
        else:
            edited[field.name] = value
    if errors:
        return EditCheck(errors=errors)
    errors = schema_problems(schema, edited)
    return EditCheck(errors=errors) if errors else EditCheck(arguments=edited)


def schema_problems(schema: Mapping[str, Any], arguments: Mapping[str, Any]) -> dict[str, str]:
    """What the schema refuses in `arguments`, by the argument it is about (`GENERAL` when it is
    about none); {} when they are valid or the schema cannot be applied here."""
    try:
        validator = Draft202012Validator(dict(schema))
        found = list(validator.iter_errors(dict(arguments)))
    except UNUSABLE_SCHEMA:
        return {}
    problems: dict[str, str] = {}
    for error in found:
        path = list(error.absolute_path)
        if path:
            name = str(path[0])
            where = ".".join(str(p) for p in path[1:])
            message = f"{where}: {error.message}" if where else error.message
        elif error.validator == "required" and isinstance(error.validator_value, list):
            missing = [str(r) for r in error.validator_value if r not in arguments]
            name, message = (missing[0], "required") if missing else (GENERAL, error.message)
        else:
            name, message = GENERAL, error.message
        problems.setdefault(name, message[:300])
    return problems
