"""The Block Kit batch card: the calls of one model response that need approval, on one card.

Each call is shown as its own card shows it, shortened to share one message (tool, risk, who
asked, approvers, the agent's reason and the arguments as plain text, the policy notes), with
its own buttons (the card's, one actions block per call, the approval id as value); a decided
call folds to its outcome line with "Show details". Under them, Approve all / Reject all name
the batch by one of its approvals: the broker decides every pending call of that card, only for
someone who may answer every one of them. Once every call ended, the card folds to one line per
call. Untrusted text goes only into `rich_text` and `plain_text`, as on the single card.
"""

from __future__ import annotations

from typing import Any

from bot.chat.views import AnyCardView, ApprovalCardView, BatchCardView
from bot.statuses import ApprovalStatus
from bot.surfaces.slack.cards import (
    APPROVAL_BLOCK,
    CARD_DETAILS_ACTION,
    DETAILS_BLOCK,
    REASON_MAX,
    approval_buttons,
    outcome_line,
    render_approval_card,
    rich_text,
)
from bot.surfaces.slack.render import Blocks, SlackMessage, context, cut, escape, mention_list

APPROVE_ALL_ACTION = "chatops_approve_all"
REJECT_ALL_ACTION = "chatops_reject_all"
BATCH_BLOCK = "chatops_batch"
# a message carries at most 50 blocks and about 12,000 characters: the calls share them
ARGUMENTS_ROOM = 6_000
REASONS_ROOM = 2_400
_RISK = {"low": ":large_green_circle: low", "medium": ":large_orange_circle: medium",
         "high": ":red_circle: high"}  # fmt: skip


def render_card(view: AnyCardView) -> SlackMessage:
    """Either card: a batch's, or one call's (`cards.render_approval_card`)."""
    if isinstance(view, BatchCardView):
        return render_batch_card(view)
    return render_approval_card(view)


def _what(item: ApprovalCardView) -> str:
    return f"{item.connector}.{item.action}" if item.connector else item.tool_name


def _header(text: str) -> dict[str, Any]:
    return {"type": "header", "text": {"type": "plain_text", "text": cut(text, 150)}}


def _plain_context(lines: list[str]) -> dict[str, Any]:
    elements = [{"type": "plain_text", "text": cut(line, 2000)} for line in lines[:10]]
    return {"type": "context", "elements": elements}


def _pending_item(number: int, item: ApprovalCardView, count: int) -> Blocks:
    """One waiting call: what it is, the reason and arguments, its notes, its own buttons."""
    requesters = mention_list(item.requesters) if item.requesters else "unknown"
    approvers = mention_list(item.approvers) if item.approvers else "anyone in thread"
    head = (
        f"*{number}. {escape(_what(item))}* \u00b7 {_RISK.get(item.risk, escape(item.risk))}\n"
        f"Tool `{escape(item.tool_name)}` \u00b7 requested by {requesters} \u00b7 "
        f"approvers {approvers}"
    )
    if item.min_approvals > 1:
        head += f"\n{item.approvals_so_far} of {item.min_approvals} approvals"
    room = max(300, ARGUMENTS_ROOM // count)
    arguments = item.arguments
    if len(arguments) > room:
        arguments = (
            arguments[:room] + f"\n... CUT: only the first {room:,} of {len(item.arguments):,} "
            "characters are shown. Do not approve what you cannot see."
        )
    reason = cut(item.reason, max(200, min(REASON_MAX, REASONS_ROOM // count)))
    body = rich_text("Reason", reason or "(none given)", preformatted=[arguments or " "])
    blocks: Blocks = [{"type": "divider"}, {"type": "section", "text": {"type": "mrkdwn",
                      "text": cut(head, 3000)}}, body]  # fmt: skip
    notes = list(item.notes)
    if item.secret_looking:
        notes.insert(0, "\u26a0\ufe0f Looks like a secret (shown as sent; check before "
                     "approving): " + ", ".join(item.secret_looking))  # fmt: skip
    if notes:
        blocks.append(_plain_context(notes))
    blocks.append(approval_buttons(item, block_id=f"{APPROVAL_BLOCK}:{item.approval_id}"))
    return blocks


def _folded_item(number: int, item: ApprovalCardView) -> Blocks:
    """One ended call: its outcome line, "Show details" beside it, the decider's comment."""
    line: dict[str, Any] = {
        "type": "section",
        "block_id": f"{DETAILS_BLOCK}:{item.approval_id}",
        "text": {"type": "mrkdwn",
                 "text": cut(f"*{number}. {escape(_what(item))}* \u00b7 {outcome_line(item)}",
                             3000)},
        "accessory": {"type": "button", "text": {"type": "plain_text", "text": "Show details"},
                      "action_id": CARD_DETAILS_ACTION, "value": item.approval_id},
    }  # fmt: skip
    blocks: Blocks = [line]
    if item.decision_reason and item.decided_by:  # a person's words (not "timeout")
        said = "Guidance for the agent: " if item.state == ApprovalStatus.CHANGES_REQUESTED else ""
        blocks.append(_plain_context([f"{said}\u201c{cut(item.decision_reason, 500)}\u201d"]))
    return blocks


def batch_buttons(view: BatchCardView) -> dict[str, Any]:
    """Approve all (only where somebody may approve every call) and Reject all."""
    lead = view.pending[0].approval_id if view.pending else view.lead_approval_id
    elements: Blocks = []
    if view.approve_all_offered:
        elements.append({"type": "button", "style": "primary", "action_id": APPROVE_ALL_ACTION,
                         "text": {"type": "plain_text", "text": "Approve all"},
                         "value": lead})  # fmt: skip
    elements.append({"type": "button", "style": "danger", "action_id": REJECT_ALL_ACTION,
                     "text": {"type": "plain_text", "text": "Reject all"},
                     "value": lead})  # fmt: skip
    return {"type": "actions", "block_id": BATCH_BLOCK, "elements": elements}


def render_batch_card(view: BatchCardView) -> SlackMessage:
    """The batch card: every call, each with its state and buttons; folded once all ended."""
    count = len(view.items)
    pending = len(view.pending)
    if view.ended:
        blocks: Blocks = [_header(f"Approvals: {count} calls")]
        for number, item in enumerate(view.items, 1):
            blocks += _folded_item(number, item)
        outcomes = ", ".join(f"{_what(i)} {i.state}" for i in view.items)
        return SlackMessage(text=escape(cut(f"Approvals: {outcomes}", 3000)), blocks=blocks)
    blocks = [
        _header(f"Approval needed: {count} calls"),
        context(f"One request asks for {count} calls; {pending} waiting. Decide each one, "
                "or all at once (each call keeps its own approvers and quorum)."),
    ]  # fmt: skip
    for number, item in enumerate(view.items, 1):
        if item.state == ApprovalStatus.PENDING:
            blocks += _pending_item(number, item, count)
        else:
            blocks += [{"type": "divider"}, *_folded_item(number, item)]
    if pending >= 2:
        blocks += [{"type": "divider"}, batch_buttons(view)]
    who = ", ".join(dict.fromkeys(r for i in view.items for r in i.requesters)) or "unknown"
    text = f"Approval needed: {count} calls ({', '.join(_what(i) for i in view.items)}) " \
        f"requested by {who}"  # fmt: skip
    return SlackMessage(text=escape(cut(text, 3000)), blocks=blocks[:50])
