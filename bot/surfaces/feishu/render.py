"""Pure render functions: view models (`bot.chat.views`) -> Feishu/Lark card JSON 2.0 and
message content.

No HTTP here, so every card can be tested as data. Cards use schema 2.0 with
`config.update_multi: true`, which Feishu requires for a card that is later PATCHed in place
(a status card, an approval card). User ids are Feishu `open_id`s (`ou_...`); card markdown
mentions them as `<at id=ou_...></at>`, text messages as `<at user_id="ou_..."></at>`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any
from urllib.parse import quote

from bot.chat.text import StepLineStyle, grant_button_label, grant_note, step_line
from bot.chat.views import ApprovalCardView, CardPlace, StatusView
from bot.statuses import ApprovalStatus, RunStatus
from bot.surfaces.feishu.limits import CARD_REQUEST_MAX_BYTES, request_bytes, wire_bytes

ANSWER_CHUNK_BYTES = CARD_REQUEST_MAX_BYTES - 1_000  # the card around the text takes the rest
# What an approval card's arguments may take in the request (escaped twice: a quote is 4 bytes);
# the reason, the facts and the form fit in the rest of Feishu's 30 KB.
ARGUMENTS_MAX_BYTES = 16_000
DETAIL_MAX_CHARS = 300
STATUS_MAX_STEPS = 25

# Approval form field and button names: the callback reads them back.
REASON_FIELD = "reject_reason"
DECISIONS = (
    "approve",
    "reject",
    "approve_thread",
    "approve_edited",
    "request_changes",
    "approve_all",  # a batch card's: every pending call of it, or none
    "reject_all",
)
EDIT_CONTROLS = ("edit", "back")  # open the edit form; back to the card (nothing decided)

RISK_TEMPLATE = {"low": "green", "medium": "orange", "high": "red"}
RUN_TEMPLATE = {
    RunStatus.RUNNING: "blue",
    RunStatus.WAITING_APPROVAL: "orange",
    RunStatus.DONE: "green",
    RunStatus.FAILED: "red",
    RunStatus.CANCELLED: "grey",
}
RUN_TITLE = {
    RunStatus.RUNNING: "Working",
    RunStatus.WAITING_APPROVAL: "Waiting for approval",
    RunStatus.DONE: "Done",
    RunStatus.FAILED: "Failed",
    RunStatus.CANCELLED: "Cancelled",
}
_STEP_ICON = {
    "running": "⏳",
    "waiting_approval": "✋",
    "done": "✅",
    "failed": "❌",
    "blocked": "⛔",
}
OUTCOMES = {
    ApprovalStatus.APPROVED: ("green", "Approved"),
    ApprovalStatus.REJECTED: ("red", "Rejected"),
    ApprovalStatus.EXPIRED: ("grey", "Expired"),
    ApprovalStatus.CANCELLED: ("grey", "Cancelled"),
    ApprovalStatus.CHANGES_REQUESTED: ("orange", "Changes requested"),
}


_MENTION_TAG = re.compile(r"<(/?)(at)\b", re.IGNORECASE)


def defuse(text: str) -> str:
    """Break `<at ...>` tags in text the bot did not write (model answers, tool output, reasons).

    Feishu renders them as mentions, so a prompt-injected `<at id=all></at>` would ping a whole
    chat; a zero-width space keeps the text readable but inert. Mentions the bot means to make
    are added by the render functions after this.
    """
    return _MENTION_TAG.sub("<\u200b\\1\\2", text)


def cut(text: str, limit: int) -> str:
    """Shorten text to `limit` characters, saying so."""
    if len(text) <= limit:
        return text
    return text[: max(0, limit - 14)] + "… (truncated)"


def at(open_id: str) -> str:
    """A mention inside card markdown."""
    return f"<at id={open_id}></at>"


def plain_text(text: str) -> dict[str, str]:
    return {"tag": "plain_text", "content": text}


def markdown_element(text: str, **extra: Any) -> dict[str, Any]:
    return {"tag": "markdown", "content": text, **extra}


def card_frame(
    title: str, template: str, elements: list[dict[str, Any]], summary: str = ""
) -> dict[str, Any]:
    return {
        "schema": "2.0",
        "config": {"update_multi": True, "summary": {"content": summary or title}},
        "header": {"title": plain_text(title), "template": template},
        "body": {"elements": elements},
    }


# ---------------------------------------------------------------- status


_STEP_STYLE = StepLineStyle(
    icons=_STEP_ICON,
    no_icon="•",
    escape=defuse,
    cut=cut,
    detail="\n    {}",
    detail_chars=DETAIL_MAX_CHARS,
)


def status_card(view: StatusView) -> dict[str, Any]:
    """The run's one status card; the last steps are kept when there are many."""
    steps = view.steps[-STATUS_MAX_STEPS:]
    lines = []
    hidden = len(view.steps) - len(steps)
    if hidden:
        lines.append(f"… {hidden} earlier steps")
    lines.extend(step_line(step, _STEP_STYLE) for step in steps)
    elements: list[dict[str, Any]] = []
    if view.headline:
        elements.append(markdown_element(defuse(cut(view.headline, 1000))))
    if lines:
        elements.append(markdown_element("\n".join(lines)))
    if view.totals:
        elements.append(markdown_element(defuse(cut(view.totals, 500)), text_size="notation"))
    if not elements:
        elements.append(markdown_element("Starting…"))
    title = RUN_TITLE.get(view.state, view.state)
    return card_frame(title, RUN_TEMPLATE.get(view.state, "blue"), elements, view.headline)


# ---------------------------------------------------------------- approval


def button_name(decision: str, approval_id: str) -> str:
    """A form button's `name`; it carries the decision too, for clients that send no value."""
    return f"{decision}__{approval_id}"


def decision_button(label: str, decision: str, style: str, approval_id: str) -> dict:
    """A submit button of the approval form: `name` and callback value name the decision."""
    return {
        "tag": "column",
        "width": "auto",
        "elements": [
            {
                "tag": "button",
                "name": button_name(decision, approval_id),
                "text": plain_text(label),
                "type": style,
                "form_action_type": "submit",
                "behaviors": [
                    {
                        "type": "callback",
                        "value": {"approval_id": approval_id, "decision": decision},
                    }
                ],
            }
        ],
    }


def _approval_form(view: ApprovalCardView) -> dict[str, Any]:
    buttons = [
        decision_button("Approve", "approve", "primary_filled", view.approval_id),
        decision_button("Edit, then approve", "edit", "default", view.approval_id),
        decision_button("Request changes", "request_changes", "default", view.approval_id),
        decision_button("Reject", "reject", "danger", view.approval_id),
    ]
    if view.grant_ttl_s is not None:  # never offered where a quorum or four-eyes applies
        label = grant_button_label(view)
        buttons.append(decision_button(label, "approve_thread", "default", view.approval_id))
    return {
        "tag": "form",
        "name": "approval_form",
        "elements": [
            {
                "tag": "input",
                "name": REASON_FIELD,
                "placeholder": plain_text(
                    "Comment (kept with your decision; the agent reads it when you reject); "
                    "what to do instead when you request changes"
                ),
                "max_length": 500,
            },
            {"tag": "column_set", "flex_mode": "flow", "columns": buttons},
        ],
    }


def fmt_time(value: datetime) -> str:
    return value.strftime("%Y-%m-%d %H:%M UTC")


def plain_block(label: str, text: str) -> list[dict[str, Any]]:
    """A bold label (ours) and untrusted text in a `plain_text` div: no markdown, no mentions,
    no code fence in it is ever interpreted, so it cannot draw fake fields on the card."""
    return [markdown_element(f"**{label}**"), {"tag": "div", "text": plain_text(text or " ")}]


def approval_details(view: ApprovalCardView) -> list[dict[str, Any]]:
    """What the call is: the tool, risk, requesters and approvers, the agent's reason, the
    arguments, the notes, the way back to the chat (a folded card keeps these in its panel)."""
    requesters = " ".join(at(r) if r.startswith("ou_") else defuse(r) for r in view.requesters)
    facts = [
        f"**Tool** `{view.tool_name}`",
        f"**Risk** {view.risk}",
        f"**Requested by** {requesters}" if view.requesters else "",
    ]
    if view.approvers:
        who = " ".join(at(a) if a.startswith("ou_") else defuse(a) for a in view.approvers)
        facts.append(f"**Approvers** {who}")
    if view.min_approvals > 1:
        facts.append(f"**Approvals** {view.approvals_so_far} of {view.min_approvals}")
    elements: list[dict[str, Any]] = [
        markdown_element("\n".join(f for f in facts if f)),
        *plain_block("Reason", cut(view.reason, 1000) or "(none given)"),
        *plain_block("Arguments", _shown_arguments(view.arguments)),
    ]
    if view.secret_looking:
        names = cut(", ".join(view.secret_looking), 500)
        elements += plain_block("⚠️ Looks like a secret (shown as sent)", names)
    elements += [{"tag": "div", "text": plain_text(note)} for note in view.notes]
    if view.thread_link:  # a copy outside the thread: the way back to the request
        url = "".join(c for c in view.thread_link if c not in "()[]<> \n")
        elements.append(markdown_element(f"[Open the chat of the request]({url})"))
    return elements


def approval_card(view: ApprovalCardView) -> dict[str, Any]:
    """An approval card: a pending one shows everything and carries the form; a decided one
    is folded to one line (outcome, who, when, and the comment under it), the rest in a
    `collapsible_panel` ("Details", closed).

    Markdown carries only what the bot wrote (labels, mentions of verified open_ids, the tool's
    sanitised name); the reason, the arguments and a decider's comment are plain text.
    """
    if view.state == ApprovalStatus.PENDING:
        elements = approval_details(view)
        if view.expires_at is not None:
            elements.append(
                markdown_element(f"Expires {fmt_time(view.expires_at)}", text_size="notation")
            )
        if view.grant_ttl_s is not None:
            elements.append({"tag": "div", "text": plain_text(grant_note(view))})
        elements.append(_approval_form(view))
        template = RISK_TEMPLATE.get(view.risk, "orange")
        return card_frame(f"Approval needed: {view.tool_name}", template, elements)
    template, outcome = OUTCOMES.get(view.state, ("grey", view.state.title()))
    line = f"**{outcome}**"  # the header says it too, with the tool
    if view.decided_by:
        line += " by " + " ".join(at(d) for d in view.decided_by)
    if view.decided_at is not None:
        line += f" · {fmt_time(view.decided_at)}"
    folded: list[dict[str, Any]] = [markdown_element(line)]
    if view.decision_reason and view.decided_by:  # a person's words (not "timeout")
        said = "Guidance for the agent: " if view.state == ApprovalStatus.CHANGES_REQUESTED else ""
        quoted = f"{said}“{cut(view.decision_reason, 500)}”"
        folded.append({"tag": "div", "text": plain_text(quoted)})
    folded.append(
        {
            "tag": "collapsible_panel",
            "expanded": False,
            "header": {"title": plain_text("Details")},
            "elements": approval_details(view),
        }
    )
    return card_frame(f"{outcome}: {view.tool_name}", template, folded)


def _shown_arguments(arguments: str) -> str:
    """The arguments whole, or the longest start that fits the card, with a loud warning."""
    if wire_bytes(arguments) <= ARGUMENTS_MAX_BYTES:
        return arguments
    low, high = 0, len(arguments)
    while low < high:  # the longest prefix within the budget
        middle = (low + high + 1) // 2
        if wire_bytes(arguments[:middle]) <= ARGUMENTS_MAX_BYTES - 200:
            low = middle
        else:
            high = middle - 1
    return (
        arguments[:low]
        + f"\n... CUT: only the first {low:,} of {len(arguments):,} characters are shown. "
        "Do not approve what you cannot see."
    )


# ---------------------------------------------------------------- answer, notices


def _split_long_line(line: str, limit: int) -> list[str]:
    """Hard-split one line so that no piece takes more than `limit` bytes on the wire."""
    pieces, current, size = [], [], 0
    for ch in line:
        n = wire_bytes(ch)
        if size + n > limit and current:
            pieces.append("".join(current))
            current, size = [], 0
        current.append(ch)
        size += n
    pieces.append("".join(current))
    return pieces


def split_markdown(text: str, limit: int = ANSWER_CHUNK_BYTES) -> list[str]:
    """Split Markdown into chunks that take under `limit` bytes in the request body (escaped
    twice, as `wire_bytes` counts), on line ends, keeping code fences whole.

    A chunk that ends inside a fenced block closes the fence and the next chunk reopens it, so
    each card renders on its own.
    """
    chunks: list[str] = []
    current: list[str] = []
    size = 0
    fence: str | None = None  # the opening fence line while inside a code block
    budget = limit - 16  # room for a closing fence

    def flush() -> None:
        nonlocal current, size
        if current:
            body = "\n".join(current)
            if fence is not None:
                body += "\n```"
            chunks.append(body)
        current = [fence] if fence is not None else []
        size = wire_bytes(fence + "\n") if fence is not None else 0

    for raw_line in text.split("\n"):
        # pieces of an over-long line fill a chunk each, so none is glued to another line
        for line in _split_long_line(raw_line, budget - 200):
            n = wire_bytes(line + "\n")
            if size + n > budget and current and current != [fence]:
                flush()
            current.append(line)
            size += n
        if raw_line.lstrip().startswith("```"):
            fence = None if fence is not None else raw_line.strip()
    if current and current != [fence]:
        body = "\n".join(current)
        chunks.append(body)
    return [c for c in chunks if c.strip()] or [""]


def answer_cards(markdown: str, *, chunk_bytes: int = ANSWER_CHUNK_BYTES) -> list[dict[str, Any]]:
    """The synthesised answer as one or more cards, each sent in a request under Feishu's
    30 KB (measured, and split again smaller in the rare case one is not)."""
    parts = split_markdown(defuse(markdown), chunk_bytes)
    cards = []
    for i, part in enumerate(parts):
        card: dict[str, Any] = {
            "schema": "2.0",
            "config": {"update_multi": True, "summary": {"content": cut(part, 100)}},
            "body": {"elements": [markdown_element(part or " ")]},
        }
        if len(parts) > 1:
            card["body"]["elements"].append(
                markdown_element(f"Part {i + 1} of {len(parts)}", text_size="notation")
            )
        cards.append(card)
    if chunk_bytes > 2_000 and any(request_bytes(c) > CARD_REQUEST_MAX_BYTES for c in cards):
        return answer_cards(markdown, chunk_bytes=chunk_bytes // 2)
    return cards


def text_content(text: str, mention: Sequence[str] = ()) -> dict[str, str]:
    """Content of a `text` message, mentions first (`<at user_id="ou_..."></at>`)."""
    prefix = " ".join(f'<at user_id="{m}"></at>' for m in mention)
    text = defuse(text)
    return {"text": f"{prefix} {text}" if prefix else text}


def private_card(text: str) -> dict[str, Any]:
    """A note for one person (a connect link, a refused click): sent so that only they see it
    (an ephemeral card in a group chat, else a direct message)."""
    return card_frame("Only you can see this", "blue", [markdown_element(defuse(text))])


def toast(kind: str, content: str) -> dict[str, str]:
    """The toast of a card callback response: kind is success, error, info or warning."""
    return {"type": kind, "content": content}


def chat_link(domain: str, chat_id: str) -> str:
    """An applink that opens a chat (Feishu has no permalink API for a thread's message)."""
    host = "applink.larksuite.com" if "larksuite" in domain else "applink.feishu.cn"
    return f"https://{host}/client/chat/open?openChatId={quote(chat_id, safe='')}"


def routed_notice_text(places: Sequence[CardPlace]) -> str:
    """The thread's note: where its approval card went."""
    chats = [p.target for p in places if p.kind == "channel"]
    if chats:
        return f"Waiting for approval in the approvals chat {', '.join(chats)}."
    return f"Waiting for approval: the card went to {len(places)} approver(s) by direct message."
