"""The arguments one imported action is assembled from, and how each travels on the wire.

`Arguments` collects the JSON Schema properties, the names to send them under
(`wire_names`) and their OpenAPI serialisation (`styles`); `safe_arg_name` gives a name model
APIs accept. `parameter_style` keeps a parameter's `style`, `explode` and `allowReserved`
wherever the manifest's default would send it differently.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from connectors.param_styles import default_explode

ARG_NAME_RE = re.compile(r"^[a-zA-Z0-9_.-]{1,64}$")
_OPERATORS = (("<=", "_lte"), (">=", "_gte"), ("<", "_lt"), (">", "_gt"), ("[]", ""))
_UNSAFE = re.compile(r"[^a-zA-Z0-9_.-]+")
_SCALAR_TYPES = frozenset({"string", "integer", "number", "boolean", "null"})
_DEFAULT_STYLE = {"path": "simple", "query": "form", "header": "simple", "cookie": "form"}


@dataclass
class Arguments:
    """The arguments being assembled for one action."""

    properties: dict[str, Any] = field(default_factory=dict)
    required: list[str] = field(default_factory=list)
    query_args: list[str] = field(default_factory=list)
    wire_names: dict[str, str] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    raw_names: set[str] = field(default_factory=set)  # parameter names as the spec has them
    styles: dict[str, dict[str, Any]] = field(default_factory=dict)

    def add(self, name: str, schema: Any, *, required: bool) -> str:
        """Add an argument under a safe name; returns the name used."""
        arg = safe_arg_name(name, self.properties)
        if arg != name:
            schema = described(schema, f"(sent as `{name}`)")
        self.properties[arg] = schema
        if required:
            self.required.append(arg)
        return arg


def safe_arg_name(name: str, taken: Mapping[str, Any] | set[str]) -> str:
    """`name` if model APIs accept it as a property name and it is free, else a safe variant:
    `DateSent<` -> `DateSent_lt`, `statuses[]` -> `statuses`, clashes get `_2`, `_3`..."""
    if ARG_NAME_RE.match(name) and name not in taken:
        return name
    base = name
    for operator, word in _OPERATORS:
        base = base.replace(operator, word)
    base = re.sub(r"_{2,}", "_", _UNSAFE.sub("_", base)).strip("_")[:64] or "arg"
    candidate, n = base, 2
    while candidate in taken:
        suffix = f"_{n}"
        candidate, n = base[: 64 - len(suffix)] + suffix, n + 1
    return candidate


def described(schema: Any, note: str) -> Any:
    if not isinstance(schema, Mapping):
        return schema
    text = schema.get("description")
    return {**schema, "description": f"{text} {note}" if text else note}


def _kinds(schema: Any) -> set[str]:
    """The JSON types a (resolved) schema allows; 'any' when it does not say."""
    if not isinstance(schema, Mapping):
        return {"any"}
    kind = schema.get("type")
    if isinstance(kind, str):
        return {kind}
    if isinstance(kind, list):
        return {str(k) for k in kind}
    if "properties" in schema or "additionalProperties" in schema:
        return {"object"}
    if "items" in schema:
        return {"array"}
    alternatives = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(alternatives, list) and alternatives:
        return set().union(*(_kinds(a) for a in alternatives))
    if "enum" in schema or "const" in schema:
        return {"string"}
    return {"any"}


def parameter_style(spec: Mapping[str, Any], location: str, schema: Any) -> dict[str, Any] | None:
    """The manifest `styles` entry of one parameter (or form field: `location` "query"), or
    None where the manifest's default sends what OpenAPI says (a scalar, or a `form`/`explode`
    list in a query).

    `schema` is the resolved, converted schema: it tells whether the value may be an object.
    """
    style = spec.get("style") if isinstance(spec.get("style"), str) else _DEFAULT_STYLE[location]
    explode = spec.get("explode") if isinstance(spec.get("explode"), bool) else None
    allow_reserved = spec.get("allowReserved") is True and location == "query"
    exploded = default_explode(style) if explode is None else explode
    kinds = _kinds(schema)
    structured = bool(kinds - _SCALAR_TYPES)
    if location == "path":
        needed = style != "simple" or structured
    elif allow_reserved or kinds & {"object", "any"}:
        needed = True  # reserved characters kept; an object is not sent as JSON
    else:
        needed = "array" in kinds and (style, exploded) != ("form", True)
    if not needed:
        return None
    entry: dict[str, Any] = {"style": style}
    if explode is not None and explode != default_explode(style):
        entry["explode"] = explode
    if allow_reserved:
        entry["allow_reserved"] = True
    return entry
