"""Tool arguments checked against the tool's JSON Schema before any PreToolUse hook runs.

A call whose arguments the schema refuses never reaches a hook: nobody is asked to approve a
call that would fail anyway, and the model reads what is wrong (the problems and the schema)
and corrects the call. Connectors check again when invoked directly.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, UnknownType
from referencing.exceptions import Unresolvable

# a schema jsonschema cannot apply (an MCP server's odd dialect): the tool checks for itself
UNUSABLE_SCHEMA = (SchemaError, UnknownType, Unresolvable)
SCHEMA_SHOWN_CHARS = 1500
PROBLEMS_SHOWN = 5


def validation_error(tool_name: str, validator: Draft202012Validator, args: Any) -> str | None:
    """A message the model can correct from, or None when the arguments are valid."""
    errors = sorted(validator.iter_errors(args), key=lambda e: [str(p) for p in e.absolute_path])
    if not errors:
        return None
    lines = []
    for error in errors[:PROBLEMS_SHOWN]:
        where = ".".join(str(p) for p in error.absolute_path) or "(arguments)"
        lines.append(f"- {where}: {error.message}")
    schema = json.dumps(validator.schema, separators=(",", ":"))[:SCHEMA_SHOWN_CHARS]
    return (
        f"Invalid arguments for {tool_name}; nothing was sent.\n"
        + "\n".join(lines)
        + f"\nExpected JSON Schema: {schema}\nFix the arguments and call the tool again."
    )


def argument_problem(tool_name: str, schema: Mapping[str, Any], args: Any) -> str | None:
    """`validation_error` for a schema given as data; None also when the schema is unusable."""
    try:
        return validation_error(tool_name, Draft202012Validator(dict(schema)), args)
    except UNUSABLE_SCHEMA:
        return None
