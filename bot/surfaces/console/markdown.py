"""Answers as the console shows them: Markdown rendered to HTML on the server, then sanitised.

The model writes the answer, and a tool result it quotes can carry anything, so the HTML is
built in two independent steps: markdown-it (CommonMark plus tables and strikethrough) with raw
HTML off, so any tag in the text comes out as text and `javascript:` links are not made; then
Ammonia (nh3) keeps only an allow-list of tags and attributes, `http`, `https` and `mailto`
links (opened in a new tab, no referrer), and no images (they would load from anywhere). The
page inserts only this HTML, and its Content-Security-Policy runs no inline script either.
"""

from __future__ import annotations

import nh3
from markdown_it import MarkdownIt

ALLOWED_TAGS = frozenset(
    {
        "a", "p", "br", "hr", "strong", "em", "s", "del", "code", "pre", "blockquote",
        "ul", "ol", "li", "h1", "h2", "h3", "h4", "h5", "h6",
        "table", "thead", "tbody", "tr", "th", "td",
    }
)  # fmt: skip
ALLOWED_ATTRIBUTES = {"a": {"href", "title"}, "ol": {"start"}}
URL_SCHEMES = frozenset({"http", "https", "mailto"})


class AnswerRenderer:
    """Markdown -> sanitised HTML. One per console (the parser is configured once)."""

    def __init__(self) -> None:
        self._md = (
            MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
            .enable("table")
            .enable("strikethrough")
        )

    def html(self, markdown: str) -> str:
        return nh3.clean(
            self._md.render(markdown),
            tags=set(ALLOWED_TAGS),
            attributes={tag: set(names) for tag, names in ALLOWED_ATTRIBUTES.items()},
            url_schemes=set(URL_SCHEMES),
            link_rel="noopener noreferrer nofollow",
            set_tag_attribute_values={"a": {"target": "_blank"}},
            strip_comments=True,
        )
