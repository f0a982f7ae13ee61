"""Slack's message size limits, and characters counted as Slack counts them.

Shared by the Slack surface (answers, cards) and the audit report's Block Kit renderer, so both
budget against the same numbers.
"""

from __future__ import annotations

from typing import Any

SECTION_LIMIT = 3_000  # characters of text in one section block
MESSAGE_TEXT_LIMIT = 40_000  # characters of a message's `text`
MESSAGE_BLOCK_LIMIT = 50  # blocks in one message
# Characters of text across one message's blocks: Slack refuses more with `msg_blocks_too_long`
# (about 13,000 in practice; not in the reference, reported in bolt-js #2509 and #2867).
BLOCKS_TEXT_LIMIT = 12_000


def slack_length(text: str) -> int:
    """Characters as Slack counts them: UTF-16 code units (an emoji such as 🚀 counts two)."""
    return len(text.encode("utf-16-le")) // 2


def blocks_text_length(blocks: list[dict[str, Any]]) -> int:
    """The text a message's blocks carry, as `msg_blocks_too_long` counts it: every text object
    (mrkdwn or plain_text: sections, fields, context elements, headers, buttons) and every
    rich text element's text."""
    total = 0
    pending: list[Any] = list(blocks)
    while pending:
        node = pending.pop()
        if isinstance(node, dict):
            text = node.get("text")
            if node.get("type") in ("mrkdwn", "plain_text", "text") and isinstance(text, str):
                total += slack_length(text)
            pending.extend(node.values())
        elif isinstance(node, list):
            pending.extend(node)
    return total
