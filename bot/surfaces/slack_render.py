"""Pure Block Kit renderers: view models from `base.py` -> Slack message and modal JSON.

No I/O here, so every card can be tested without HTTP. Each renderer returns the fallback
`text` (notifications, screen readers) with the `blocks`, both inside Slack's limits.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bot.surfaces.base import ApprovalCardView, StatusStep, StatusView
from bot.surfaces.slack_markdown import (
    BLOCKS_TEXT_LIMIT,
    SECTION_LIMIT,
    escape,
    markdown_to_mrkdwn,
    pack_messages,
    slack_length,
    split_mrkdwn,
)

APPROVE_ACTION = "chatops_approve"
REJECT_ACTION = "chatops_reject"
APPROVE_THREAD_ACTION = "chatops_approve_thread"
APPROVAL_BLOCK = "chatops_approval"
REJECT_MODAL = "chatops_reject_modal"
REASON_BLOCK = "reason"
REASON_INPUT = "reason_input"
PLAIN_TEXT_CHARS = 3_000  # Slack shows longer plain messages cut, behind "Show more"

Blocks = list[dict[str, Any]]

_STEP_ICONS = {
    "running": ":hourglass_flowing_sand:",
    "waiting_approval": ":raised_hand:",
    "done": ":white_check_mark:",
    "failed": ":x:",
    "blocked": ":no_entry:",
}
_RUN_TITLES = {
    "running": ":hourglass_flowing_sand: Working on it",
    "waiting_approval": ":raised_hand: Waiting for approval",
    "done": ":white_check_mark: Done",
    "failed": ":x: Failed",
    "cancelled": ":heavy_multiplication_x: Cancelled",
}
_RISK_ICONS = {
    "low": ":large_green_circle: low",
    "medium": ":large_orange_circle: medium",
    "high": ":red_circle: high",
}
_OUTCOMES = {
    "approved": ":white_check_mark: Approved",
    "rejected": ":no_entry: Rejected",
    "expired": ":alarm_clock: Expired (no answer in time)",
    "cancelled": ":heavy_multiplication_x: Cancelled",
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


def _step_line(step: StatusStep) -> str:
    line = f"{_STEP_ICONS.get(step.state, '')} `{escape(step.label)}`"
    if step.elapsed_s is not None:
        line += f" ({step.elapsed_s:.1f}s)"
    if step.detail:
        line += f" \u2014 {escape(cut(step.detail, 200))}"
    return line


def render_status(view: StatusView) -> SlackMessage:
    """The run's one status message: title, headline, a checklist of steps, a totals line."""
    title = _RUN_TITLES.get(view.state, view.state)
    blocks: Blocks = [
        section(f"*{title}*" + (f"\n{escape(view.headline)}" if view.headline else ""))
    ]
    shown = _newest_steps([_step_line(step) for step in view.steps], SECTION_LIMIT - 40)
    if shown:
        blocks.append(section("\n".join(shown)))
    if view.totals:
        blocks.append(context(escape(view.totals)))
    text = title + (f": {view.headline}" if view.headline else "")
    return SlackMessage(text=escape(cut(text, 3000)), blocks=blocks)


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


# approval card ----------------------------------------------------------------------------------


def _arguments_block(arguments: str) -> str:
    """The exact arguments in a code block, cut so the section stays under Slack's limit."""
    body = escape(arguments)
    room = SECTION_LIMIT - len("*Arguments*\n```\n\n```") - 48
    if len(body) > room:
        body = body[:room]
        entity = body.rfind("&")
        if entity > room - 6 and ";" not in body[entity:]:
            body = body[:entity]
        body += "\n\u2026 (cut; full arguments in the call log)"
    return f"*Arguments*\n```\n{body}\n```"


def render_approval_card(view: ApprovalCardView) -> SlackMessage:
    """The approval card; buttons only while pending, then the outcome and who decided."""
    title = (
        f"Approval needed: {view.connector}.{view.action}"
        if view.connector
        else (f"Approval needed: {view.tool_name}")
    )
    fields = [
        f"*Risk*\n{_RISK_ICONS.get(view.risk, escape(view.risk))}",
        f"*Requester*\n{user_mention(view.requester) if view.requester else 'unknown'}",
        f"*Tool*\n`{escape(view.tool_name)}`",
        "*Approvers*\n" + (mention_list(view.approvers) if view.approvers else "anyone in thread"),
    ]
    blocks: Blocks = [
        {"type": "header", "text": {"type": "plain_text", "text": cut(title, 150)}},
        {"type": "section", "fields": [{"type": "mrkdwn", "text": cut(f, 2000)} for f in fields]},
        section("*Reason*\n" + (escape(cut(view.reason, 2900)) if view.reason else "_none given_")),
        section(_arguments_block(view.arguments)),
    ]
    facts: list[str] = []
    if view.min_approvals > 1:
        facts.append(f"{view.approvals_so_far} of {view.min_approvals} approvals")
    if view.expires_at is not None and view.state == "pending":
        epoch = int(view.expires_at.timestamp())
        fallback = view.expires_at.strftime("%Y-%m-%d %H:%M UTC")
        facts.append(f"Expires <!date^{epoch}^{{date_short_pretty}} {{time}}|{fallback}>")
    if view.state == "pending":
        if facts:
            blocks.append(context(" \u00b7 ".join(facts)))
        blocks.append(_buttons(view.approval_id))
        text = f"{title} (risk {view.risk}) requested by {view.requester}"
    else:
        outcome = _OUTCOMES.get(view.state, escape(view.state))
        if view.decided_by:
            outcome += f" by {mention_list(view.decided_by)}"
        if view.decision_reason:
            outcome += f"\n>{escape(cut(view.decision_reason, 2000))}"
        blocks.append(section(outcome))
        text = f"{title}: {view.state}"
    return SlackMessage(text=cut(text, 3000), blocks=blocks)


def _buttons(approval_id: str) -> dict[str, Any]:
    def button(label: str, action_id: str, style: str | None = None) -> dict[str, Any]:
        element: dict[str, Any] = {
            "type": "button",
            "text": {"type": "plain_text", "text": label},
            "action_id": action_id,
            "value": approval_id,
        }
        if style:
            element["style"] = style
        return element

    return {
        "type": "actions",
        "block_id": APPROVAL_BLOCK,
        "elements": [
            button("Approve", APPROVE_ACTION, "primary"),
            button("Reject", REJECT_ACTION, "danger"),
            button("Approve for this thread", APPROVE_THREAD_ACTION),
        ],
    }


def render_reject_modal(approval_id: str, origin: dict[str, str], title: str) -> dict[str, Any]:
    """The modal that asks why (optional); `origin` says where the card lives, for replies."""
    metadata = json.dumps({"approval_id": approval_id, **origin})
    return {
        "type": "modal",
        "callback_id": REJECT_MODAL,
        "private_metadata": metadata,
        "title": {"type": "plain_text", "text": "Reject"},
        "submit": {"type": "plain_text", "text": "Reject"},
        "close": {"type": "plain_text", "text": "Cancel"},
        "blocks": [
            section(f"Reject *{escape(cut(title, 200))}*?"),
            {
                "type": "input",
                "block_id": REASON_BLOCK,
                "optional": True,
                "label": {"type": "plain_text", "text": "Reason (told to the agent)"},
                "element": {
                    "type": "plain_text_input",
                    "action_id": REASON_INPUT,
                    "multiline": True,
                    "max_length": 2000,
                },
            },
        ],
    }


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
