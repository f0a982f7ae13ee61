"""What an approver's edit changed in a call's arguments, in a few lines: shown on the card and
told to the model (so it does not "correct" the call back)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

DIFF_LINES = 12
DIFF_VALUE_CHARS = 120


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= DIFF_VALUE_CHARS else text[: DIFF_VALUE_CHARS - 1] + "\u2026"


def describe_edit(before: Mapping[str, Any], after: Mapping[str, Any]) -> str:
    """A short diff of the arguments, one line per argument that changed."""
    lines: list[str] = []
    for key in sorted({*before, *after}):
        if key not in after:
            lines.append(f"- {key} (was {_shown(before[key])})")
        elif key not in before:
            lines.append(f"+ {key}: {_shown(after[key])}")
        elif before[key] != after[key]:
            lines.append(f"~ {key}: {_shown(before[key])} -> {_shown(after[key])}")
    if len(lines) > DIFF_LINES:
        lines = [*lines[:DIFF_LINES], f"... and {len(lines) - DIFF_LINES} more"]
    return "\n".join(lines)
