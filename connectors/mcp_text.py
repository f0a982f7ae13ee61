"""Text an MCP server wrote (descriptions, names, titles), made fit for every prompt."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from typing import Any

_ANSI_ESCAPES = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")
_DROPPED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn"})  # controls, bidi, zero-width
MAX_SCHEMA_TEXT_CHARS = 300


def clean_text(text: str, limit: int) -> str:
    """Text an MCP server wrote, as the model may read it in every prompt: ANSI escape
    sequences, control and invisible format characters (bidi overrides, zero-width) removed,
    blank runs folded, and at most `limit` characters (a cut ends with "…")."""
    text = _ANSI_ESCAPES.sub("", text)
    text = "".join(
        ch for ch in text if ch in "\n\t" or unicodedata.category(ch) not in _DROPPED_CATEGORIES
    )
    text = re.sub(r"\n\s*\n\s*", "\n\n", re.sub(r"[ \t]+", " ", text)).strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def clean_schema(schema: Any) -> Any:
    """The input schema with its `description` and `title` texts cleaned and capped."""
    if isinstance(schema, Mapping):
        return {
            key: clean_text(value, MAX_SCHEMA_TEXT_CHARS)
            if key in ("description", "title") and isinstance(value, str)
            else clean_schema(value)
            for key, value in schema.items()
        }
    if isinstance(schema, list):
        return [clean_schema(item) for item in schema]
    return schema
