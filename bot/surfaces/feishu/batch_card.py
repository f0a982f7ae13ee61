"""The Feishu batch card (card JSON 2.0): the calls of one model response that need approval.

Each call is shown as its card shows it (tool, risk, who asked, approvers, the agent's reason
and the arguments as plain text, the policy notes), with a form of its own: a comment field
(named after the call, so the callback reads the right one) and Approve, Request changes and
Reject. A decided call folds to its outcome line with its details in a closed panel. A last
form carries Approve all / Reject all (and a comment for them), naming the batch by one of its
approvals: the broker decides every pending call of that card, only for someone who may answer
every one of them. Once every call ended, the card folds to one line per call.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from bot.chat.views import AnyCardView, ApprovalCardView, BatchCardView
from bot.statuses import ApprovalStatus
from bot.surfaces.feishu.render import (
    ARGUMENTS_MAX_BYTES,
    OUTCOMES,
    REASON_FIELD,
    RISK_TEMPLATE,
    approval_card,
    approval_details,
    at,
    card_frame,
    cut,
    decision_button,
    fmt_time,
    markdown_element,
    plain_text,
)

_RISK_ORDER = {"low": 0, "medium": 1, "high": 2}


def any_card(view: AnyCardView) -> dict[str, Any]:
    """Either card: a batch's, or one call's (`render.approval_card`)."""
    return batch_card(view) if isinstance(view, BatchCardView) else approval_card(view)


def _what(item: ApprovalCardView) -> str:
    return f"{item.connector}.{item.action}" if item.connector else item.tool_name


def _comment(name: str, hint: str) -> dict[str, Any]:
    return {"tag": "input", "name": name, "placeholder": plain_text(hint), "max_length": 500}


def _call_form(item: ApprovalCardView) -> dict[str, Any]:
    """One waiting call's own decision: a comment, then Approve / Request changes / Reject."""
    buttons = [
        decision_button("Approve", "approve", "primary_filled", item.approval_id),
        decision_button("Request changes", "request_changes", "default", item.approval_id),
        decision_button("Reject", "reject", "danger", item.approval_id),
    ]
    return {
        "tag": "form",
        "name": f"approval_form__{item.approval_id}",
        "elements": [
            _comment(
                f"{REASON_FIELD}__{item.approval_id}",
                "Comment (the agent reads it when you reject); what to do instead when "
                "you request changes",
            ),  # fmt: skip
            {"tag": "column_set", "flex_mode": "flow", "columns": buttons},
        ],
    }


def _batch_form(view: BatchCardView) -> dict[str, Any]:
    lead = view.pending[0].approval_id
    buttons = []
    if view.approve_all_offered:
        buttons.append(decision_button("Approve all", "approve_all", "primary_filled", lead))
    buttons.append(decision_button("Reject all", "reject_all", "danger", lead))
    return {
        "tag": "form",
        "name": "batch_form",
        "elements": [
            _comment(f"{REASON_FIELD}__{lead}", "Comment for every call (optional)"),
            {"tag": "column_set", "flex_mode": "flow", "columns": buttons},
        ],
    }


def _outcome_line(number: int, item: ApprovalCardView) -> str:
    _, outcome = OUTCOMES.get(item.state, ("grey", item.state.title()))
    line = f"**{number}. {_what(item)}**: **{outcome}**"
    if item.decided_by:
        line += " by " + " ".join(at(d) for d in item.decided_by)
    if item.decided_at is not None:
        line += f" · {fmt_time(item.decided_at)}"
    return line


def _folded_item(number: int, item: ApprovalCardView) -> list[dict[str, Any]]:
    elements: list[dict[str, Any]] = [markdown_element(_outcome_line(number, item))]
    if item.decision_reason and item.decided_by:  # a person's words (not "timeout")
        said = "Guidance for the agent: " if item.state == ApprovalStatus.CHANGES_REQUESTED else ""
        quoted = f"{said}\u201c{cut(item.decision_reason, 300)}\u201d"
        elements.append({"tag": "div", "text": plain_text(quoted)})
    elements.append({"tag": "collapsible_panel", "expanded": False,
                     "header": {"title": plain_text("Details")},
                     "elements": approval_details(item)})  # fmt: skip
    return elements


def _shortened(item: ApprovalCardView, count: int) -> ApprovalCardView:
    """The call with its arguments cut to its share of the card (a warning when cut)."""
    room = max(500, ARGUMENTS_MAX_BYTES // (4 * count))
    if len(item.arguments) <= room:
        return item
    arguments = (
        item.arguments[:room] + f"\n... CUT: only the first {room:,} of "
        f"{len(item.arguments):,} characters are shown. Do not approve what you cannot see."
    )
    return dataclasses.replace(item, arguments=arguments)


def batch_card(view: BatchCardView) -> dict[str, Any]:
    """Every call with its state and its own form; Approve all / Reject all; folded once all
    ended. Untrusted text only in `plain_text`, as on the single card."""
    count = len(view.items)
    risk = max((i.risk for i in view.items), key=lambda r: _RISK_ORDER.get(r, 1))
    elements: list[dict[str, Any]] = []
    if view.ended:
        for number, item in enumerate(view.items, 1):
            elements += _folded_item(number, item)
        return card_frame(f"Approvals: {count} calls", "grey", elements)
    pending = len(view.pending)
    elements.append(markdown_element(
        f"One request asks for {count} calls; {pending} waiting. Decide each one, or all at "
        "once (each call keeps its own approvers and quorum).", text_size="notation",
    ))  # fmt: skip
    for number, item in enumerate(view.items, 1):
        elements.append({"tag": "hr"})
        if item.state != ApprovalStatus.PENDING:
            elements += _folded_item(number, item)
            continue
        elements.append(markdown_element(f"**{number}. {_what(item)}**"))
        elements += approval_details(_shortened(item, count))
        if item.expires_at is not None:
            elements.append(markdown_element(f"Expires {fmt_time(item.expires_at)}",
                                             text_size="notation"))  # fmt: skip
        elements.append(_call_form(item))
    if pending >= 2:
        elements += [{"tag": "hr"}, _batch_form(view)]
    return card_frame(
        f"Approval needed: {count} calls", RISK_TEMPLATE.get(risk, "orange"), elements
    )
