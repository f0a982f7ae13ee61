"""Parsing an OpenAPI document and following its local `$ref`s (JSON Pointer, RFC 6901).

Published documents are big (PagerDuty's is 2.8 MB of JSON, OpenAI's 3 MB of YAML), so JSON is
parsed as JSON (a hundred times faster than a YAML parser) and YAML with libyaml's C loader
when PyYAML has it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import yaml

from bot.errors import ConnectorError
from connectors.loading import YAML_LOADER
from connectors.manifest import ManifestError

Progress = Callable[[str], None]
# where a bundled document (`openapi_files`) records the references it refused, and why
REFUSED_KEY = "x-chatops-refused-refs"
_INDEX = re.compile(r"^(0|[1-9][0-9]*)$")


class RefError(ConnectorError):
    """A `$ref` that cannot be followed; `pointer` is where the problem is."""

    def __init__(self, message: str, pointer: str) -> None:
        super().__init__(message)
        self.pointer = pointer


def parse_spec_text(text: str, path: Path | str = "<spec>") -> Any:
    """JSON when it looks like JSON (fast); YAML otherwise, or when the JSON parser refuses it
    (YAML reads most JSON with small faults, and its errors give the line and column)."""
    if text.lstrip()[:1] in ("{", "["):
        try:
            return json.loads(text)
        except ValueError:
            pass
    try:
        return yaml.load(text, Loader=YAML_LOADER)  # a safe loader, C or Python
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise ManifestError(f"{path}: not JSON or YAML{where}: {problem}", path=path) from None
    except (ValueError, RecursionError) as exc:  # a date such as 2020-13-45, absurd nesting
        raise ManifestError(f"{path}: not JSON or YAML: {exc}", path=path) from None


def pointer(*tokens: str | int) -> str:
    """A JSON Pointer fragment (`#/paths/~1pets/get`) from raw tokens."""
    escaped = (str(t).replace("~", "~0").replace("/", "~1") for t in tokens)
    return "#/" + "/".join(escaped) if tokens else "#"


def resolve_pointer(doc: Any, ref: str) -> Any:
    """The value a local `$ref` names: `#` plus a JSON Pointer, percent-decoded as a URI fragment.

    Array elements are addressed by index (`#/components/schemas/Tag/allOf/0`); `~1` is `/` and
    `~0` is `~` (in that order, as RFC 6901 requires).
    """
    refused = doc.get(REFUSED_KEY) if isinstance(doc, Mapping) else None
    if isinstance(refused, Mapping) and ref in refused:
        raise RefError(f"$ref {ref!r} {refused[ref]}", ref)
    if not ref.startswith("#"):
        raise RefError(f"$ref {ref!r} points outside the document (only local $refs work)", ref)
    fragment = unquote(ref[1:])
    if fragment == "":
        return doc
    if not fragment.startswith("/"):
        raise RefError(f"$ref {ref!r} is not a JSON Pointer", ref)
    node = doc
    for raw in fragment[1:].split("/"):
        token = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and token in node:
            node = node[token]
        elif isinstance(node, list) and _INDEX.match(token) and int(token) < len(node):
            node = node[int(token)]
        else:
            raise RefError(f"$ref {ref!r} does not resolve (no {token!r})", ref)
    return node


def deref(doc: Any, node: Any, where: str, *, limit: int = 32) -> tuple[Any, str]:
    """Follow `$ref` chains on an object that is not a schema (parameter, request body, path
    item); returns the target and its pointer."""
    for _ in range(limit):
        if not isinstance(node, Mapping) or not isinstance(node.get("$ref"), str):
            return node, where
        where = node["$ref"]
        node = resolve_pointer(doc, where)
    raise RefError(f"$ref chain longer than {limit} at {where}", where)
