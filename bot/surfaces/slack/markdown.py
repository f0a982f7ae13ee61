"""Markdown (what the model writes) -> Slack mrkdwn, and splitting under Slack's size limits.

Slack's mrkdwn is not Markdown: bold is `*x*`, italic `_x_`, links `<url|text>`, no headings
and no tables, and `&`, `<`, `>` must be escaped everywhere. Code blocks and inline code are
kept verbatim (escaped only). Long answers are cut at paragraph and line boundaries, never
inside a link or an entity, and a code block cut in two is closed and reopened; lengths are
counted as Slack counts them (UTF-16 code units) against the section, block and per-message
block-text limits.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from bot.surfaces.slack.limits import (
    BLOCKS_TEXT_LIMIT,
    MESSAGE_BLOCK_LIMIT,
    SECTION_LIMIT,
    slack_length,
)

__all__ = ["BLOCKS_TEXT_LIMIT", "SECTION_LIMIT", "slack_length"]

_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$")
_BULLET = re.compile(r"^(\s*)[-*+]\s+(.*)$")
_RULE = re.compile(r"^\s{0,3}([-*_])(\s*\1){2,}\s*$")
_QUOTE = re.compile(r"^\s{0,3}>\s?(.*)$")
_TABLE_ROW = re.compile(r"^\s*\|.*\|\s*$")
_INLINE_CODE = re.compile(r"(`+)(.+?)\1")
_IMAGE = re.compile(r"!\[([^\]]*)\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_LINK = re.compile(r"\[([^\]]+)\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_AUTOLINK = re.compile(r"<((?:https?|mailto):[^>\s]+)>")
_SAFE_LINK_TARGET = re.compile(r"(?i)^(?:https?://[^\s/?#]+|mailto:[^\s@]+@)")
_BOLD = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1")
_ITALIC_STAR = re.compile(r"(?<![\w*])\*(?=\S)([^*]+?)(?<=\S)\*(?![\w*])")
_STRIKE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")
_PLACEHOLDER = re.compile("\x00(\\d+)\x00")


def escape(text: str) -> str:
    """Escape the three characters Slack treats as control characters."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _inline(text: str) -> str:
    """Convert the inline Markdown of one line; code spans and links are protected first."""
    kept: list[str] = []

    def keep(value: str) -> str:
        kept.append(value)
        return f"\x00{len(kept) - 1}\x00"

    text = _INLINE_CODE.sub(lambda m: keep(f"`{escape(m.group(2))}`"), text)
    text = _IMAGE.sub(lambda m: keep(_link(m.group(2), m.group(1) or m.group(2))), text)
    text = _LINK.sub(lambda m: keep(_link(m.group(2), m.group(1))), text)
    text = _AUTOLINK.sub(lambda m: keep(f"<{_url(m.group(1))}>"), text)
    text = escape(text)
    text = _BOLD.sub(lambda m: "\x01" + m.group(2) + "\x01", text)
    text = _ITALIC_STAR.sub(r"_\1_", text)
    text = _STRIKE.sub(r"~\1~", text)
    text = text.replace("\x01", "*")
    return _PLACEHOLDER.sub(lambda m: kept[int(m.group(1))], text)


def _link(target: str, label: str) -> str:
    """`<url|label>` for an http(s) or mailto target; anything else as plain text.

    Slack's `<...>` also makes mentions and broadcasts (`<!channel>`, `<!here>`, `<@U123>`,
    `<!subteam^S1>`), so `[click](!channel)` in an answer must never become `<!channel|click>`.
    """
    if _SAFE_LINK_TARGET.match(target):
        return f"<{_url(target)}|{_link_text(label)}>"
    if label == target:
        return escape(label)
    return f"{escape(label)} ({escape(target)})"


def _url(url: str) -> str:
    """A URL inside `<...>`: `&` escaped as Slack expects, `|` (the label separator) encoded."""
    return escape(url).replace("|", "%7C")


def _link_text(text: str) -> str:
    """Link labels cannot contain `|` or `>`; bold/italic markers inside them are dropped."""
    plain = re.sub(r"(\*\*|__|`)", "", text)
    return escape(plain).replace("|", "\u2758")


def markdown_to_mrkdwn(markdown: str) -> str:
    """Convert a Markdown document to Slack mrkdwn."""
    out: list[str] = []
    lines = markdown.replace("\r\n", "\n").split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        fence = _FENCE.match(line)
        if fence:
            marker = fence.group(1)
            body: list[str] = []
            i += 1
            while i < len(lines) and not lines[i].strip().startswith(marker):
                body.append(lines[i])
                i += 1
            i += 1  # the closing fence (or the end of the text)
            out.append("```\n" + escape("\n".join(body)) + "\n```")
            continue
        if _TABLE_ROW.match(line):
            rows: list[str] = []
            while i < len(lines) and _TABLE_ROW.match(lines[i]):
                rows.append(lines[i].strip())
                i += 1
            out.append("```\n" + escape("\n".join(rows)) + "\n```")
            continue
        out.append(_block_line(line))
        i += 1
    return "\n".join(out).strip("\n")


def _block_line(line: str) -> str:
    if heading := _HEADING.match(line):
        title = re.sub(r"^(\*\*|__)(.*)\1$", r"\2", heading.group(1))
        return f"*{_inline(title)}*"
    if _RULE.match(line):
        return "\u2015" * 10
    if bullet := _BULLET.match(line):
        indent = " " * (len(bullet.group(1).expandtabs(4)) // 2 * 4)
        return f"{indent}\u2022 {_inline(bullet.group(2))}"
    if quote := _QUOTE.match(line):
        return f"> {_inline(quote.group(1))}"
    return _inline(line)


def split_mrkdwn(text: str, limit: int = SECTION_LIMIT) -> list[str]:
    """Cut mrkdwn into pieces of at most `limit` characters, on paragraph or line boundaries.

    A code block that must be cut is closed at the end of one piece and reopened in the next.
    """
    pieces: list[str] = []
    current: list[str] = []
    size = 0
    in_code = False
    for line in _lines_within(text, limit - 8):
        opens_or_closes = line.count("```") % 2 == 1
        extra = slack_length(line) + (1 if current else 0)
        if current and size + extra + (4 if in_code else 0) > limit:
            piece = "\n".join(current)
            pieces.append(piece + ("\n```" if in_code else ""))
            current, size = (["```"], 3) if in_code else ([], 0)
            extra = slack_length(line) + (1 if current else 0)
        current.append(line)
        size += extra
        if opens_or_closes:
            in_code = not in_code
    if current:
        pieces.append("\n".join(current))
    return [p for p in pieces if p.strip() and p.strip() != "```\n```"]


def _lines_within(text: str, limit: int) -> Iterator[str]:
    """Yield the text's lines, hard-cutting any longer than `limit` outside links and entities."""
    for line in text.split("\n"):
        while slack_length(line) > limit:
            cut = _safe_cut(line, _fitting(line, limit))
            yield line[:cut]
            line = line[cut:]
        yield line


def _fitting(line: str, limit: int) -> int:
    """How many characters of `line` fit in `limit` as Slack counts them."""
    used = 0
    for index, char in enumerate(line):
        used += 2 if ord(char) > 0xFFFF else 1
        if used > limit:
            return index
    return len(line)


def _safe_cut(line: str, limit: int) -> int:
    """A cut position <= limit that does not fall inside `<...>` or `&...;`, preferring a space."""
    cut = limit
    opener = max(line.rfind("<", 0, cut), line.rfind("&", 0, cut))
    if opener > 0:
        closer = line.find(">" if line[opener] == "<" else ";", opener)
        if closer == -1 or closer >= cut:
            cut = opener
    space = line.rfind(" ", max(cut - 200, 1), cut)
    return space + 1 if space > 0 else max(cut, 1)


def pack_messages(
    sections: list[str],
    *,
    text_limit: int = BLOCKS_TEXT_LIMIT,
    block_limit: int = MESSAGE_BLOCK_LIMIT,
) -> list[list[str]]:
    """Group section texts into messages under the per-message block count and the text all of
    a message's blocks may carry (counted as Slack counts it)."""
    messages: list[list[str]] = []
    current: list[str] = []
    size = 0
    for section in sections:
        length = slack_length(section)
        if current and (len(current) >= block_limit or size + length > text_limit):
            messages.append(current)
            current, size = [], 0
        current.append(section)
        size += length
    if current:
        messages.append(current)
    return messages


def strip_mention(text: str, bot_user_id: str) -> str:
    """Drop the bot's own `<@U...>` mention (with or without a label) and tidy the spaces."""
    if not bot_user_id:
        return text.strip()
    cleaned = re.sub(rf"<@{re.escape(bot_user_id)}(\|[^>]*)?>", "", text)
    return re.sub(r"[ \t]{2,}", " ", cleaned).strip()


def mentions(text: str, user_id: str) -> bool:
    """True if `text` contains a `<@user_id>` mention."""
    return bool(user_id) and re.search(rf"<@{re.escape(user_id)}(\|[^>]*)?>", text) is not None


def unescape(text: str) -> str:
    """Slack's escaping undone, for text handed to the model."""
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
