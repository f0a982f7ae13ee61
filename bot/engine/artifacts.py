"""Artifacts: a tool result that is a document for the user (HTML or Markdown) stays out of the
model's context and is attached to the answer instead.

Models asked to be helpful paste whole documents back into their answers; the seed keeps them
out: the model reads `[Artifact generated: <name>]` and a short summary, the surfaces attach the
document (a file on Slack and Feishu, a link on the console). A result is a document by its
content type (`text/html`, `text/markdown`) or because its tool says so (manifest
`result: {artifact: true}`).
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bot.engine.tools import ToolResult

EXTENSIONS = {"text/html": ".html", "text/markdown": ".md", "text/x-markdown": ".md"}
MAX_ARTIFACT_CHARS = 2_000_000  # a document beyond this is cut (with a note) before it is kept
SUMMARY_CHARS = 300
_TAG = re.compile(r"<(script|style)\b.*?</\1\s*>|<[^>]+>", re.IGNORECASE | re.DOTALL)
_TITLE = re.compile(r"<title[^>]*>(.*?)</title\s*>", re.IGNORECASE | re.DOTALL)
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.+)$", re.MULTILINE)
_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True)
class Artifact:
    """One document a tool produced for the user."""

    name: str
    content_type: str  # text/html or text/markdown
    content: str
    tool_name: str = ""
    tool_call_id: str = ""

    def to_dict(self) -> dict[str, str]:
        return {
            "name": self.name,
            "content_type": self.content_type,
            "content": self.content,
            "tool_name": self.tool_name,
            "tool_call_id": self.tool_call_id,
        }


def artifacts_of(checkpoint: Mapping[str, Any] | None) -> list[Artifact]:
    """The documents a run's checkpoint holds (a run answered again after a restart)."""
    return [Artifact(**item) for item in (checkpoint or {}).get("artifacts") or ()]


def is_document_type(content_type: str) -> bool:
    """An HTML or Markdown content type: a document for the user, not data for the model."""
    return content_type.split(";", 1)[0].strip().lower() in EXTENSIONS


def document_type(result: ToolResult) -> str | None:
    """`text/html` or `text/markdown` when the result is a document for the user, else None."""
    if result.is_error:
        return None
    base = result.content_type.split(";", 1)[0].strip().lower()
    if base in EXTENSIONS:
        return "text/markdown" if base == "text/x-markdown" else base
    if result.artifact:
        return "text/html" if _looks_like_html(result.content) else "text/markdown"
    return None


def as_artifact(result: ToolResult, tool_name: str, call_id: str, taken: set[str]) -> Artifact:
    """The document of `result` under a name unique in the run (`taken` is updated)."""
    kind = document_type(result) or "text/markdown"
    content = result.content
    if len(content) > MAX_ARTIFACT_CHARS:
        content = content[:MAX_ARTIFACT_CHARS] + "\n\n[...document cut: it was too long]"
    return Artifact(_unique(result.filename, tool_name, kind, taken), kind, content, tool_name,
                    call_id)  # fmt: skip


def observation(artifact: Artifact) -> str:
    """What the model reads instead of the document."""
    return (
        f"[Artifact generated: {artifact.name}] {summary(artifact)} The document "
        f"({len(artifact.content):,} characters) is attached to the answer for the user to "
        "open; do not repeat its content, refer to it by name."
    )


def summary(artifact: Artifact) -> str:
    """Title and the first words of the text (tags and markup left out)."""
    text = artifact.content
    if artifact.content_type == "text/html":
        found = _TITLE.search(text)
        title = html.unescape(found.group(1)).strip() if found else ""
        body = html.unescape(_TAG.sub(" ", text))
    else:
        found = _HEADING.search(text)
        title = found.group(1).strip() if found else ""
        body = re.sub(r"[#*_`>|\-]+", " ", text)
    words = " ".join(body.split())
    if len(words) > SUMMARY_CHARS:
        words = words[:SUMMARY_CHARS].rsplit(" ", 1)[0] + " ..."
    head = f'Title: "{" ".join(title.split())[:120]}". ' if title else ""
    return f"{head}It begins: {words}" if words else f"{head}(no text)"


def _looks_like_html(text: str) -> bool:
    start = text.lstrip()[:200].lower()
    return start.startswith(("<!doctype html", "<html")) or "<body" in start


def _unique(filename: str, tool_name: str, kind: str, taken: set[str]) -> str:
    extension = EXTENSIONS[kind]
    base = _SAFE_NAME.sub("-", filename.rsplit("/", 1)[-1]).strip("-.")[:80]
    if base.lower().endswith(extension):
        base = base[: -len(extension)]
    base = base or _SAFE_NAME.sub("-", tool_name).strip("-.") or "document"
    name, n = f"{base}{extension}", 1
    while name in taken:
        n += 1
        name = f"{base}-{n}{extension}"
    taken.add(name)
    return name
