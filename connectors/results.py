"""Turning a response body into an observation: JSON projection (`result.pick`) and a length cap.

The model pays for every character it reads, so results are cut to `max_chars` with a marker it
can see (it then knows to ask for less, e.g. with a filter), never silently.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from connectors.manifest import ResultSpec


def pick(value: Any, paths: Sequence[str]) -> Any:
    """Keep only the dotted paths, preserving shape.

    Through objects a segment is a key; through lists a number selects an element and any other
    segment applies to every element: `incidents.id` on `{"incidents": [{...}, ...]}` gives
    `{"incidents": [{"id": ...}, ...]}`. Missing keys are left out.
    """
    return _project(value, [p.split(".") for p in paths if p])


def _project(value: Any, paths: list[list[str]]) -> Any:
    if not paths or any(not p for p in paths):
        return value
    if isinstance(value, list):
        indexed = [p for p in paths if p[0].isdigit()]
        mapped = [p for p in paths if not p[0].isdigit()]
        out: list[Any] = []
        for path in indexed:
            i = int(path[0])
            if i < len(value):
                out.append(_project(value[i], [path[1:]]))
        if mapped:
            out.extend(_project(item, mapped) for item in value)
        return out
    if isinstance(value, dict):
        grouped: dict[str, list[list[str]]] = {}
        for path in paths:
            grouped.setdefault(path[0], []).append(path[1:])
        return {key: _project(value[key], rest) for key, rest in grouped.items() if key in value}
    return value


def truncate(text: str, max_chars: int, *, cut_after_bytes: int | None = None) -> str:
    """Cut to `max_chars` with a visible marker saying how much was left out.

    `cut_after_bytes`: the response itself was only read that far, so the marker says that
    instead of a total the reader never saw.
    """
    if cut_after_bytes is not None:
        marker = f"\n...[truncated: the response was cut after {cut_after_bytes} bytes]"
    elif len(text) <= max_chars:
        return text
    else:
        marker = f"\n...[truncated: showing {max_chars} of {len(text)} characters]"
    if len(text) + len(marker) <= max_chars:
        return text + marker
    return text[: max(0, max_chars - len(marker))] + marker


def render_result(
    text: str,
    content_type: str,
    spec: ResultSpec,
    *,
    status: int = 200,
    redact: Callable[[str], str] = str,
    cut_after_bytes: int | None = None,
) -> str:
    """The observation for a successful response: projected, then redacted, then cut.

    Redaction comes before the cut, so a secret straddling the cut point is still recognised.
    `cut_after_bytes` says the body was not read whole (it is then not parsed as JSON).
    """
    if not text.strip() and cut_after_bytes is None:
        return f"HTTP {status}: done (empty response)."
    data: Any = None
    is_json = "json" in content_type.lower()
    if cut_after_bytes is None and (is_json or text.lstrip()[:1] in ("{", "[")):
        try:
            data = json.loads(text)
            is_json = True
        except ValueError:
            is_json = False
    else:
        is_json = False
    if is_json:
        if spec.pick:
            data = pick(data, spec.pick)
        text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return truncate(redact(text), spec.max_chars, cut_after_bytes=cut_after_bytes)
