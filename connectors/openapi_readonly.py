"""`readOnly` properties: a request must not send them, wherever the schema declares them.

A property is read-only when it says so, beside its `$ref` or through it. The names are
collected across composition too (`allOf`/`oneOf`/`anyOf` members), because a schema may list
in `required` a field one of its members declares read-only (Cloudflare's DNS records).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from connectors.openapi_doc import RefError, resolve_pointer


def read_only_names(doc: Any, owner: Mapping[str, Any], *, limit: int = 64) -> list[str]:
    """Properties marked `readOnly` (directly or through their `$ref`) in `owner` and in the
    schemas it is composed of (`allOf`/`oneOf`/`anyOf` members, followed through `$ref`s):
    Cloudflare's DNS records list read-only fields in `required` beside a `oneOf`."""
    names: list[str] = []
    pending: list[Any] = [owner]
    seen: set[int] = set()
    while pending and len(seen) < limit:
        node = _followed(doc, pending.pop())
        if not isinstance(node, Mapping) or id(node) in seen:
            continue
        seen.add(id(node))
        for name, prop in (node.get("properties") or {}).items():
            if is_read_only(doc, prop):
                names.append(str(name))
        for key in ("allOf", "oneOf", "anyOf"):
            members = node.get(key)
            if isinstance(members, list):
                pending.extend(members)
    return list(dict.fromkeys(names))


def _followed(doc: Any, node: Any, *, limit: int = 8) -> Any:
    for _ in range(limit):
        if not isinstance(node, Mapping) or not isinstance(node.get("$ref"), str):
            return node
        try:
            node = resolve_pointer(doc, node["$ref"])
        except RefError:
            return None
    return None


def is_read_only(doc: Any, prop: Any) -> bool:
    """`readOnly: true` on the property, beside its `$ref`, or on what the `$ref` names."""
    for _ in range(8):
        if not isinstance(prop, Mapping):
            return False
        if prop.get("readOnly") is True:
            return True
        if not isinstance(prop.get("$ref"), str):
            return False
        try:
            prop = resolve_pointer(doc, prop["$ref"])
        except RefError:
            return False
    return False


def drop_required(schema: dict[str, Any], read_only: list[str]) -> None:
    """A request cannot send a read-only field, so it cannot be required either."""
    schema["required"] = [name for name in schema["required"] if name not in read_only]
    if not schema["required"]:
        del schema["required"]
