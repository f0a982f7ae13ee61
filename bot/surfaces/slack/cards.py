"""Pure Block Kit renderers of the approval card (folded to one line once decided, its details
in a modal on demand) and its dialogs (reject, approve with a comment, request changes, approve
for thread; the edit modal is `edit_modal.py`).

Text the bot did not write (the agent's reason, the arguments, a rejecter's reason, argument
names) is only ever put in `rich_text` text elements or `plain_text` objects: Slack does not
parse mrkdwn there, so nothing in it can close a code block, draw a bold "Risk" field or
mention a channel. mrkdwn carries only what the bot wrote itself (labels, mentions of verified
user ids, the tool's sanitised name).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from bot.chat.text import grant_button_label, grant_note
from bot.chat.views import ApprovalCardView
from bot.statuses import ApprovalStatus
from bot.surfaces.slack.render import (
    Blocks,
    SlackMessage,
    context,
    cut,
    escape,
    mention_list,
    section,
    user_mention,
)

APPROVE_ACTION = "chatops_approve"
REJECT_ACTION = "chatops_reject"
APPROVE_THREAD_ACTION = "chatops_approve_thread"
EDIT_ACTION = "chatops_edit"
CHANGES_ACTION = "chatops_request_changes"
CHANGES_MODAL = "chatops_changes_modal"
APPROVE_COMMENT_ACTION = "chatops_approve_comment"
CARD_DETAILS_ACTION = "chatops_card_details"  # a folded card's "Show details"
DETAILS_BLOCK = "chatops_card_details"
APPROVAL_BLOCK = "chatops_approval"
REJECT_MODAL = "chatops_reject_modal"
GRANT_MODAL = "chatops_grant_modal"
APPROVE_MODAL = "chatops_approve_modal"
DETAILS_MODAL = "chatops_details_modal"
REASON_BLOCK = "reason"
REASON_INPUT = "reason_input"
GRANTEES_BLOCK = "grantees"
GRANTEES_INPUT = "grantees_input"

# A message's blocks carry at most about 12,000 characters of text in all (Slack refuses more):
# arguments 7,200, the reason 1,500, the rest (fields, notes, names, an outcome) under 2,500.
ARGUMENTS_CHUNK = 2_400  # characters per preformatted element
ARGUMENTS_CHUNKS = 3  # a card shows up to 7,200 characters of arguments, then says it cut
REASON_MAX = 1_500

_RISK_ICONS = {
    "low": ":large_green_circle: low",
    "medium": ":large_orange_circle: medium",
    "high": ":red_circle: high",
}
_OUTCOMES = {
    ApprovalStatus.APPROVED: ":white_check_mark: Approved",
    ApprovalStatus.REJECTED: ":no_entry: Rejected",
    ApprovalStatus.EXPIRED: ":alarm_clock: Expired (no answer in time)",
    ApprovalStatus.CANCELLED: ":heavy_multiplication_x: Cancelled",
    ApprovalStatus.CHANGES_REQUESTED: ":leftwards_arrow_with_hook: Changes requested",
}


def _text(text: str, *, bold: bool = False) -> dict[str, Any]:
    element: dict[str, Any] = {"type": "text", "text": text or " "}
    if bold:
        element["style"] = {"bold": True}
    return element


def rich_text(label: str, body: str = "", *, preformatted: list[str] | None = None) -> dict:
    """A `rich_text` block: a bold label, then plain text and/or preformatted chunks."""
    first = [_text(label, bold=True)]
    if body:
        first.append(_text("\n" + body))
    elements: list[dict[str, Any]] = [{"type": "rich_text_section", "elements": first}]
    for chunk in preformatted or ():
        elements.append({"type": "rich_text_preformatted", "elements": [_text(chunk)]})
    return {"type": "rich_text", "elements": elements}


def _plain_context(text: str) -> dict[str, Any]:
    return {"type": "context", "elements": [{"type": "plain_text", "text": cut(text, 2000)}]}


def _argument_chunks(arguments: str) -> list[str]:
    room = ARGUMENTS_CHUNK * ARGUMENTS_CHUNKS
    shown = arguments[:room]
    chunks = [shown[i : i + ARGUMENTS_CHUNK] for i in range(0, len(shown), ARGUMENTS_CHUNK)]
    if len(arguments) > room:
        chunks[-1] += (
            f"\n... CUT: only the first {room:,} of {len(arguments):,} characters are shown. "
            "Do not approve what you cannot see."
        )
    return chunks or [" "]


def card_title(view: ApprovalCardView) -> str:
    what = f"{view.connector}.{view.action}" if view.connector else view.tool_name
    return f"Approval needed: {what}"


def card_details(view: ApprovalCardView) -> Blocks:
    """What the call is: who asked, the tool, its risk and approvers, the agent's reason, the
    arguments, the notes and the way back to the thread (a folded card shows these on demand)."""
    requesters = mention_list(view.requesters) if view.requesters else "unknown"
    fields = [
        f"*Risk*\n{_RISK_ICONS.get(view.risk, escape(view.risk))}",
        f"*Requested by*\n{requesters}",
        f"*Tool*\n`{escape(view.tool_name)}`",
        "*Approvers*\n" + (mention_list(view.approvers) if view.approvers else "anyone in thread"),
    ]
    blocks: Blocks = [
        {"type": "section", "fields": [{"type": "mrkdwn", "text": cut(f, 2000)} for f in fields]},
        rich_text("Reason", cut(view.reason, REASON_MAX) if view.reason else "(none given)"),
        rich_text("Arguments", preformatted=_argument_chunks(view.arguments)),
    ]
    if view.secret_looking:
        names = ", ".join(view.secret_looking)
        blocks.append(
            rich_text(
                "\u26a0\ufe0f Looks like a secret (shown as sent; check before approving):",
                cut(names, 500),
            )
        )
    blocks += [_plain_context(note) for note in view.notes]
    if view.thread_link:  # a copy outside the thread: the way back to the request
        url = view.thread_link.translate({ord(c): None for c in "<>|"})
        blocks.append(context(f"<{url}|Open the thread of the request>"))
    return blocks


def _header(text: str) -> dict[str, Any]:
    return {"type": "header", "text": {"type": "plain_text", "text": cut(text, 150)}}


def _when(at: datetime) -> str:
    """A time every reader sees in their own zone (with a UTC fallback)."""
    fallback = at.strftime("%Y-%m-%d %H:%M UTC")
    return f"<!date^{int(at.timestamp())}^{{date_short_pretty}} {{time}}|{fallback}>"


def outcome_line(view: ApprovalCardView) -> str:
    """How it ended, by whom and when, in one line of mrkdwn the bot writes itself."""
    line = _OUTCOMES.get(view.state, escape(view.state))
    if view.decided_by:
        line += f" by {mention_list(view.decided_by)}"
    if view.decided_at is not None:
        line += f" \u00b7 {_when(view.decided_at)}"
    return line


def render_approval_card(view: ApprovalCardView) -> SlackMessage:
    """The approval card while it waits (everything, and the buttons); once decided, folded
    (`render_folded_card`)."""
    if view.state != ApprovalStatus.PENDING:
        return render_folded_card(view)
    title = card_title(view)
    blocks: Blocks = [_header(title), *card_details(view)]
    facts: list[str] = []
    if view.min_approvals > 1:
        facts.append(f"{view.approvals_so_far} of {view.min_approvals} approvals")
    if view.expires_at is not None:
        facts.append(f"Expires {_when(view.expires_at)}")
    if facts:
        blocks.append(context(" \u00b7 ".join(facts)))
    if view.grant_ttl_s is not None:
        blocks.append(_plain_context(grant_note(view)))
    blocks.append(approval_buttons(view))
    who = ", ".join(view.requesters) or "unknown"
    text = f"{title} (risk {view.risk}) requested by {who}"
    return SlackMessage(text=escape(cut(text, 3000)), blocks=blocks)


def render_folded_card(view: ApprovalCardView) -> SlackMessage:
    """A decided card, folded: the tool as its header, one line with the outcome, who decided
    and when, and a "Show details" button beside it that opens the whole card in a modal
    (`render_details_modal`); the decider's comment under it, as plain text (they wrote it)."""
    what = f"{view.connector}.{view.action}" if view.connector else view.tool_name
    line = section(outcome_line(view))
    line["block_id"] = DETAILS_BLOCK
    line["accessory"] = {
        "type": "button",
        "text": {"type": "plain_text", "text": "Show details"},
        "action_id": CARD_DETAILS_ACTION,
        "value": view.approval_id,
    }
    blocks: Blocks = [_header(f"Approval: {what}"), line]
    if view.decision_reason and view.decided_by:  # a person's words (not "timeout")
        said = "Guidance for the agent: " if view.state == ApprovalStatus.CHANGES_REQUESTED else ""
        blocks.append(_plain_context(f"{said}\u201c{cut(view.decision_reason, 1000)}\u201d"))
    return SlackMessage(text=escape(cut(f"Approval: {what}: {view.state}", 3000)), blocks=blocks)


def render_details_modal(view: ApprovalCardView) -> dict[str, Any]:
    """The whole of a folded card, for whoever pressed "Show details" (read only)."""
    blocks: Blocks = [_header(card_title(view)), *card_details(view), section(outcome_line(view))]
    if view.decision_reason and view.decided_by:
        label = (
            "Guidance for the agent"
            if view.state == ApprovalStatus.CHANGES_REQUESTED
            else "Comment"
        )
        blocks.append(rich_text(label, cut(view.decision_reason, 1000)))
    elif view.decision_reason:
        blocks.append(_plain_context(f"Ended: {view.decision_reason}"))
    return {
        "type": "modal",
        "callback_id": DETAILS_MODAL,
        "title": {"type": "plain_text", "text": "Approval details"},
        "close": {"type": "plain_text", "text": "Close"},
        "blocks": blocks,
    }


def approval_buttons(view: ApprovalCardView, *, block_id: str = APPROVAL_BLOCK) -> dict[str, Any]:
    """The card's buttons (the App Home shows the same ones, one block id per approval)."""

    def button(label: str, action_id: str, style: str | None = None) -> dict[str, Any]:
        element: dict[str, Any] = {
            "type": "button",
            "text": {"type": "plain_text", "text": label},
            "action_id": action_id,
            "value": view.approval_id,
        }
        if style:
            element["style"] = style
        return element

    buttons = [
        button("Approve", APPROVE_ACTION, "primary"),
        button("Edit, then approve", EDIT_ACTION),
        button("Request changes", CHANGES_ACTION),
        button("Reject", REJECT_ACTION, "danger"),
        button("Approve with comment", APPROVE_COMMENT_ACTION),
    ]
    if view.grant_ttl_s is not None:  # never offered where a quorum or four-eyes applies
        buttons.append(button(grant_button_label(view), APPROVE_THREAD_ACTION))
    return {"type": "actions", "block_id": block_id, "elements": buttons}


def _modal(callback_id: str, title: str, submit: str, metadata: dict, blocks: Blocks) -> dict:
    return {
        "type": "modal",
        "callback_id": callback_id,
        "private_metadata": json.dumps(metadata),
        "title": {"type": "plain_text", "text": title},
        "submit": {"type": "plain_text", "text": submit},
        "close": {"type": "plain_text", "text": "Cancel"},
        "blocks": blocks,
    }


def _comment_input(label: str, *, optional: bool) -> dict[str, Any]:
    return {
        "type": "input",
        "block_id": REASON_BLOCK,
        "optional": optional,
        "label": {"type": "plain_text", "text": label},
        "element": {
            "type": "plain_text_input",
            "action_id": REASON_INPUT,
            "multiline": True,
            "max_length": 2000,
        },
    }


def render_reject_modal(approval_id: str, origin: dict[str, str], title: str) -> dict[str, Any]:
    """The modal that asks why (optional); `origin` says where the card lives, for replies."""
    return _modal(
        REJECT_MODAL,
        "Reject",
        "Reject",
        {"approval_id": approval_id, **origin},
        [
            _plain_context(f"Reject {cut(title, 200)}?"),
            _comment_input("Reason (told to the agent)", optional=True),
        ],
    )


def render_approve_modal(approval_id: str, origin: dict[str, str], title: str) -> dict[str, Any]:
    """ "Approve with comment": the comment is kept with the decision (the card, the call
    log, audit reports); submitting approves."""
    return _modal(
        APPROVE_MODAL,
        "Approve",
        "Approve",
        {"approval_id": approval_id, **origin},
        [
            _plain_context(f"Approve {cut(title, 200)}?"),
            _comment_input("Comment (kept with your approval)", optional=False),
        ],
    )


def render_changes_modal(approval_id: str, origin: dict[str, str], title: str) -> dict[str, Any]:
    """The modal that asks what the agent should do instead (required): the call does not run,
    the agent reads the text as guidance."""
    return _modal(
        CHANGES_MODAL,
        "Request changes",
        "Send to the agent",
        {"approval_id": approval_id, **origin},
        [
            _plain_context(f"Do not run {cut(title, 200)}; tell the agent what to do instead."),
            {
                "type": "input",
                "block_id": REASON_BLOCK,
                "label": {"type": "plain_text", "text": "What should the agent do instead?"},
                "element": {
                    "type": "plain_text_input",
                    "action_id": REASON_INPUT,
                    "multiline": True,
                    "max_length": 2000,
                },
            },
        ],
    )


def render_grant_modal(
    approval_id: str, origin: dict[str, str], view: ApprovalCardView
) -> dict[str, Any]:
    """ "Approve for this thread": who the grant covers (the requesters, preselected; the
    approver may name others), and what it covers, before anything is decided."""
    users = [u for u in view.requesters if user_mention(u) != escape(u)][:20]
    element: dict[str, Any] = {"type": "multi_users_select", "action_id": GRANTEES_INPUT}
    if users:
        element["initial_users"] = users
    return _modal(
        GRANT_MODAL,
        "Approve for this thread",
        "Approve",
        {"approval_id": approval_id, **origin},
        [
            _plain_context(grant_note(view) or "Approve this call for the thread."),
            {
                "type": "input",
                "block_id": GRANTEES_BLOCK,
                "label": {"type": "plain_text", "text": "Who may run it again without asking"},
                "element": element,
            },
        ],
    )
