"""Answers as the console shows them: Markdown rendered to HTML on the server, then sanitised.

The model writes the answer, and a tool result it quotes can carry anything, so the HTML is
built in two independent steps: markdown-it (CommonMark plus tables and strikethrough) with raw
HTML off, so any tag in the text comes out as text and `javascript:` links are not made; then
Ammonia (nh3) keeps only an allow-list of tags and attributes, `http`, `https` and `mailto`
links (opened in a new tab, no referrer), and no images (they would load from anywhere). The
page inserts only this HTML, and its Content-Security-Policy runs no inline script either.

Two things survive as classes, each checked twice (when the tokens are made, and by the
sanitiser's attribute filter, which drops any other value): a table column's alignment
(`align-left`, `align-center`, `align-right`: markdown-it's `style` is not allowed through)
and a code block's language (`language-<name>`, the first word of the fence's info string, when
it is 1 to 32 letters, digits or `+ # _ . -`). `live_html` is the same rendering of an answer
still being written: only its complete lines, an open code fence closed for the moment.
"""

from __future__ import annotations

import re

import nh3
from markdown_it import MarkdownIt
from markdown_it.rules_core import StateCore

ALLOWED_TAGS = frozenset(
    {
        "a", "p", "br", "hr", "strong", "em", "s", "del", "code", "pre", "blockquote",
        "ul", "ol", "li", "h1", "h2", "h3", "h4", "h5", "h6",
        "table", "thead", "tbody", "tr", "th", "td",
    }
)  # fmt: skip
ALLOWED_ATTRIBUTES = {
    "a": {"href", "title"},
    "ol": {"start"},
    "th": {"class"},
    "td": {"class"},
    "code": {"class"},
}
URL_SCHEMES = frozenset({"http", "https", "mailto"})
ALIGN_CLASSES = frozenset({"align-left", "align-center", "align-right"})
LANGUAGE = re.compile(r"[A-Za-z0-9+#_.-]{1,32}")
LANGUAGE_CLASS = re.compile(r"language-[a-z0-9+#_.-]{1,32}")
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})", re.MULTILINE)


def _classes(state: StateCore) -> None:
    """A core rule: table alignment as a class; a fence's info cut to a plain language name."""
    for token in state.tokens:
        if token.type in ("th_open", "td_open"):
            style = str(token.attrGet("style") or "")
            token.attrs.pop("style", None)
            if style.startswith("text-align:"):
                token.attrSet("class", "align-" + style.removeprefix("text-align:"))
        elif token.type == "fence":
            word = token.info.strip().split(maxsplit=1)[0] if token.info.strip() else ""
            token.info = word.lower() if LANGUAGE.fullmatch(word) else ""


def _keep_attribute(element: str, attribute: str, value: str) -> str | None:
    """The sanitiser's last word on each allowed attribute: classes from the list above only."""
    if attribute != "class":
        return value
    if element in ("th", "td"):
        return value if value in ALIGN_CLASSES else None
    if element == "code":
        return value if LANGUAGE_CLASS.fullmatch(value) else None
    return None


class AnswerRenderer:
    """Markdown -> sanitised HTML. One per console (the parser is configured once)."""

    def __init__(self) -> None:
        self._md = (
            MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
            .enable("table")
            .enable("strikethrough")
        )
        self._md.core.ruler.push("console_classes", _classes)

    def html(self, markdown: str) -> str:
        return nh3.clean(
            self._md.render(markdown),
            tags=set(ALLOWED_TAGS),
            attributes={tag: set(names) for tag, names in ALLOWED_ATTRIBUTES.items()},
            attribute_filter=_keep_attribute,
            url_schemes=set(URL_SCHEMES),
            link_rel="noopener noreferrer nofollow",
            set_tag_attribute_values={"a": {"target": "_blank"}},
            strip_comments=True,
        )

    def live_html(self, text: str) -> str:
        """An answer being written, as far as it can be shown without raw Markdown: the line
        being written once its emphasis and code marks are closed (else it waits for them), a
        code block still open closed for now; a table's header waits for its delimiter row."""
        lines = text.split("\n")
        lines[-1] = _settled(lines[-1])  # the line being written, up to a mark still open
        while lines and not lines[-1].strip():
            lines.pop()
        if lines and lines[-1].lstrip().startswith("|") and not _table_started(lines):
            lines.pop()  # a lone header row: "| a | b |" waits for its "|---|"
        shown = "\n".join(lines)
        if len(FENCE.findall(shown)) % 2:
            shown += "\n```"
        return self.html(shown)


def _settled(line: str) -> str:
    """The longest start of the line being written that shows no half-made mark (a table
    row or a fence waits whole: the next line says what it is)."""
    if line.lstrip().startswith(("|", "`", "~")):
        return ""
    for end in range(len(line), 0, -1):
        if _balanced(line[:end]):
            return line[:end]
    return ""


def _balanced(line: str) -> bool:
    """Whether a line being written shows no Markdown mark half-made."""
    body = re.sub(r"^\s*(?:[*+-]|\d+[.)])\s+", "", line)  # a list item's own marker
    marks = (body.count("**") % 2, body.replace("**", "").count("*") % 2, body.count("`") % 2,
             body.count("~~") % 2, body.count("[") - body.count("]"),
             body.count("(") - body.count(")"))  # fmt: skip
    return not any(marks)


def _table_started(lines: list[str]) -> bool:
    """Whether the table the last line belongs to already has its delimiter row."""
    for line in reversed(lines):
        stripped = line.strip()
        if not stripped.startswith("|"):
            return False
        if set(stripped) <= set("|:- "):
            return True
    return False
