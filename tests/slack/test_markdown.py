"""Markdown -> mrkdwn conversion and splitting under Slack's limits (pure functions)."""

from __future__ import annotations

from bot.surfaces.slack.markdown import (
    markdown_to_mrkdwn,
    mentions,
    pack_messages,
    split_mrkdwn,
    strip_mention,
)


def test_headings_become_bold():
    assert markdown_to_mrkdwn("# Summary\n## **Details** ##") == "*Summary*\n*Details*"


def test_bold_italic_strike():
    out = markdown_to_mrkdwn("**bold** and __also__, *it* and _it_, ~~gone~~")
    assert out == "*bold* and *also*, _it_ and _it_, ~gone~"


def test_links_and_images():
    out = markdown_to_mrkdwn("[the runbook](https://x.io/a?b=1&c=2) ![graph](https://x.io/g.png)")
    assert out == "<https://x.io/a?b=1&amp;c=2|the runbook> <https://x.io/g.png|graph>"


def test_autolinks_kept_and_control_characters_escaped():
    assert markdown_to_mrkdwn("see <https://x.io> & a<b") == "see <https://x.io> &amp; a&lt;b"


def test_lists_become_bullets_with_nesting():
    out = markdown_to_mrkdwn("- one\n  * two\n1. first")
    assert out == "\u2022 one\n    \u2022 two\n1. first"


def test_code_blocks_kept_verbatim_but_escaped():
    md = "```python\nif a < b:\n    x = **y**\n```"
    assert markdown_to_mrkdwn(md) == "```\nif a &lt; b:\n    x = **y**\n```"


def test_inline_code_is_not_formatted():
    assert markdown_to_mrkdwn("run `a **b** <c>` now") == "run `a **b** &lt;c&gt;` now"


def test_tables_become_code_blocks():
    out = markdown_to_mrkdwn("| a | b |\n|---|---|\n| 1 | 2 |")
    assert out == "```\n| a | b |\n|---|---|\n| 1 | 2 |\n```"


def test_arithmetic_stars_are_not_italic():
    assert markdown_to_mrkdwn("2 * 3 * 4 = 24") == "2 * 3 * 4 = 24"


def test_split_respects_limit_and_keeps_everything():
    text = "\n".join(f"line {i} " + "x" * 50 for i in range(400))
    pieces = split_mrkdwn(text, 3000)
    assert all(len(p) <= 3000 for p in pieces)
    assert "\n".join(pieces) == text


def test_split_reopens_code_blocks():
    text = "intro\n```\n" + "\n".join("code " * 20 for _ in range(100)) + "\n```\noutro"
    pieces = split_mrkdwn(text, 1000)
    assert len(pieces) > 2
    for piece in pieces:
        assert len(piece) <= 1000
        assert piece.count("```") % 2 == 0, piece


def test_split_never_cuts_a_link_or_entity():
    link = "<https://example.com/very/long/path|label>"
    text = ("a&amp;b " + link + " ") * 400
    for piece in split_mrkdwn(text, 500):
        assert len(piece) <= 500
        assert piece.count("<") == piece.count(">")
        assert not piece.rstrip().endswith(("&", "&amp", "&am", "&a"))


def test_pack_messages_under_block_and_text_limits():
    sections = ["x" * 2999] * 60
    messages = pack_messages(sections)
    assert sum(len(m) for m in messages) == 60
    for group in messages:
        assert len(group) <= 50
        assert sum(len(s) for s in group) <= 12_000  # msg_blocks_too_long otherwise


def test_strip_and_detect_mention():
    assert strip_mention("<@U0BOT> restart  api", "U0BOT") == "restart api"
    assert strip_mention("hey <@U0BOT|chatops> go", "U0BOT") == "hey go"
    assert mentions("hi <@U0BOT>", "U0BOT")
    assert not mentions("hi <@U0OTHER>", "U0BOT")
