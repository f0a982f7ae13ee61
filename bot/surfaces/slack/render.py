"""Pure Block Kit renderers: view models (`bot.chat.views`) -> Slack message JSON (the approval card
and its dialogs are in `cards.py`).

No I/O here, so every card can be tested without HTTP. Each renderer returns the fallback
`text` (notifications, screen readers) with the `blocks`, both inside Slack's limits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bot.chat.text import StepLineStyle, step_line
from bot.chat.views import StatusView
from bot.statuses import RunStatus
from bot.surfaces.slack.markdown import (
    BLOCKS_TEXT_LIMIT,
    SECTION_LIMIT,
    escape,
    markdown_to_mrkdwn,
    pack_messages,
    slack_length,
    split_mrkdwn,
)

PLAIN_TEXT_CHARS = 3_000  # Slack shows longer plain messages cut, behind "Show more"
STOP_ACTION = "chatops_stop"  # the status message's Stop button
FEEDBACK_ACTION = "chatops_feedback"  # the answer's thumbs up / down (feedback_buttons)

Blocks = list[dict[str, Any]]

_STEP_ICONS = {
    "running": ":hourglass_flowing_sand:",
    "waiting_approval": ":raised_hand:",
    "done": ":white_check_mark:",
    "failed": ":x:",
    "blocked": ":no_entry:",
}
RUN_TITLES = {
    RunStatus.RUNNING: ":hourglass_flowing_sand: Working on it",
    RunStatus.WAITING_APPROVAL: ":raised_hand: Waiting for approval",
    RunStatus.DONE: ":white_check_mark: Done",
    RunStatus.FAILED: ":x: Failed",
    RunStatus.CANCELLED: ":heavy_multiplication_x: Cancelled",
}


@dataclass(frozen=True)
class SlackMessage:
    """What `chat.postMessage` / `chat.update` get: fallback text and blocks."""

    text: str
    blocks: Blocks


def cut(text: str, limit: int, marker: str = "\u2026") -> str:
    """`text` cut to `limit` characters with a visible marker."""
    return text if len(text) <= limit else text[: limit - len(marker)] + marker


def section(mrkdwn: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": cut(mrkdwn, SECTION_LIMIT)}}


def plain(text: str) -> dict[str, Any]:
    return {"type": "plain_text", "text": text}


def context(mrkdwn: str) -> dict[str, Any]:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": cut(mrkdwn, 3000)}]}


def user_mention(user_id: str) -> str:
    """`<@U123>` for a Slack user id; anything else (a group name) shown as plain text."""
    if user_id[:1] in ("U", "W") and user_id.isalnum():
        return f"<@{user_id}>"
    return escape(user_id)


def mention_list(user_ids: Sequence[str]) -> str:
    return ", ".join(user_mention(u) for u in user_ids)


# status -------------------------------------------------------------------------------------


_STEP_STYLE = StepLineStyle(
    icons=_STEP_ICONS, escape=escape, cut=cut, label="`{}`", detail=" \u2014 {}", detail_chars=200
)


def render_status(view: StatusView) -> SlackMessage:
    """The run's one status message: title, headline, a checklist of steps, a totals line."""
    title = RUN_TITLES.get(view.state, view.state)
    blocks: Blocks = [
        section(f"*{title}*" + (f"\n{escape(view.headline)}" if view.headline else ""))
    ]
    shown = _newest_steps([step_line(step, _STEP_STYLE) for step in view.steps], SECTION_LIMIT - 40)
    if shown:
        blocks.append(section("\n".join(shown)))
    if view.totals:
        blocks.append(context(escape(view.totals)))
    if view.live:
        blocks.append(stop_block(view))
    return SlackMessage(text=status_text(view), blocks=blocks)


def status_text(view: StatusView) -> str:
    """The status message's fallback text (notifications): its title and headline."""
    title = RUN_TITLES.get(view.state, view.state)
    return escape(cut(title + (f": {view.headline}" if view.headline else ""), 3000))


def stop_block(view: StatusView) -> dict[str, Any]:
    """The Stop button of a live run. Its value is only a hint: the click is tied to the
    message it was made on, and who may stop is checked server-side."""
    confirm = {
        "title": plain("Stop this run?"),
        "text": plain("The agent stops; a step already running finishes, nothing more runs."),
        "confirm": plain("Stop"),
        "deny": plain("Keep going"),
        "style": "danger",
    }
    button = {"type": "button", "action_id": STOP_ACTION, "text": plain("Stop"),
              "style": "danger", "value": view.run_id[:2000], "confirm": confirm}  # fmt: skip
    return {"type": "actions", "elements": [button]}


def feedback_block() -> dict[str, Any]:
    """Thumbs up / down under an answer (a `context_actions` block of `feedback_buttons`)."""

    def button(emoji: str, value: str, label: str) -> dict[str, Any]:
        text = {"type": "plain_text", "text": emoji, "emoji": True}
        return {"text": text, "value": value, "accessibility_label": label}

    element = {
        "type": "feedback_buttons",
        "action_id": FEEDBACK_ACTION,
        "positive_button": button("\U0001f44d", "up", "This answer helped"),
        "negative_button": button("\U0001f44e", "down", "This answer did not help"),
    }
    return {"type": "context_actions", "elements": [element]}


def _newest_steps(lines: list[str], limit: int) -> list[str]:
    """The newest step lines that fit in `limit` characters (the running step is the newest,
    and the one people watch), the older ones summed up in a first line, as on Feishu."""
    kept: list[str] = []
    size = 0
    for line in reversed(lines):
        if size + slack_length(line) + 1 > limit:
            break
        kept.append(line)
        size += slack_length(line) + 1
    hidden = len(lines) - len(kept)
    if hidden:
        summary = f"\u2026 {hidden} earlier steps"
        while kept and size + len(summary) + 1 > limit:
            size -= slack_length(kept.pop()) + 1  # drop the oldest kept to make room
            hidden += 1
            summary = f"\u2026 {hidden} earlier steps"
        kept.append(summary)
    return list(reversed(kept))


# answers and notices ----------------------------------------------------------------------------


def render_answer(markdown: str) -> list[SlackMessage]:
    """The answer as mrkdwn sections, split into as many messages as Slack's limits need (50
    blocks, 3,000 characters a section, 12,000 across a message's blocks)."""
    mrkdwn = markdown_to_mrkdwn(markdown) or "_(empty answer)_"
    sections = split_mrkdwn(mrkdwn, SECTION_LIMIT)
    return [
        SlackMessage(text="\n".join(group), blocks=[section(s) for s in group])
        for group in pack_messages(sections, text_limit=BLOCKS_TEXT_LIMIT)
    ]


def render_plain_text(markdown: str, *, limit: int = PLAIN_TEXT_CHARS) -> list[str]:
    """The answer as escaped plain-text message bodies (no blocks): the last resort when Slack
    refuses blocks and the file upload, too."""
    return split_mrkdwn(escape(markdown) or "(empty answer)", limit)


def render_notice(text: str, mention: Sequence[str] = ()) -> SlackMessage:
    """A short note, mentions first (`<@U1> <@U2> text`) so the people are notified."""
    prefix = " ".join(user_mention(u) for u in mention)
    body = escape(text)
    full = f"{prefix} {body}" if prefix else body
    return SlackMessage(text=cut(full, 3000), blocks=[section(full)])
