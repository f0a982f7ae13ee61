"""`pending` sent to the bot in a direct message: the sender's inbox, "Waiting for you", as a card.

The list is the broker's (`Decisions.waiting_for`: what this person may approve now, oldest
first), each entry with its tool, risk, who asked, the agent's reason, its age and expiry and
a link to the chat its card is in, where its buttons decide (a Feishu callback is judged
against the card it was clicked on, so the list carries no buttons of its own). Answered
without the model, to the sender alone (a message to their open_id).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bot.chat.ports import Decisions
from bot.chat.threads import InboundMessage
from bot.chat.waiting import WAITING_TITLE, WaitingApproval
from bot.surfaces.feishu.render import at, card_frame, chat_link, cut, defuse, markdown_element

if TYPE_CHECKING:
    from bot.surfaces.feishu.surface import FeishuSurface

PENDING_COMMAND = "pending"
LIST_SHOWN = 20  # entries the card shows (a card has a size limit), oldest first
NOTHING = "Nothing is waiting for you."


def pending_card(entries: list[WaitingApproval], domain: str) -> dict[str, Any]:
    """The card: one markdown element per waiting approval (text the bot did not write is
    defused), or a line saying nothing waits."""
    elements: list[dict[str, Any]] = []
    for entry in entries[:LIST_SHOWN]:
        view = entry.card
        what = f"{view.connector}.{view.action}" if view.connector else view.tool_name
        who = ", ".join(at(r) for r in view.requesters) or "unknown"
        lines = [f"**{defuse(cut(what, 200))}** · risk {defuse(view.risk)} · asked by {who}"]
        if view.reason:
            lines.append(defuse(cut(view.reason, 300)))
        facts = [entry.age_and_expiry()]
        if view.min_approvals > 1:
            facts.append(f"{view.approvals_so_far} of {view.min_approvals} approvals")
        if entry.posted_at is not None and entry.posted_at.thread.channel:
            facts.append(
                f"[Open the card's chat]({chat_link(domain, entry.posted_at.thread.channel)})"
            )
        lines.append(" · ".join(facts))
        elements.append(markdown_element("\n".join(lines)))
    if not entries:
        elements.append(markdown_element(NOTHING))
    elif len(entries) > LIST_SHOWN:
        elements.append(markdown_element(f"and {len(entries) - LIST_SHOWN} more, oldest first"))
    return card_frame(WAITING_TITLE, "blue", elements)


async def answer_pending(
    surface: FeishuSurface, decisions: Decisions | None, message: InboundMessage, domain: str
) -> bool:
    """True when `message` was `pending` in a direct message (answered here with the card)."""
    if decisions is None or not message.direct:
        return False
    if message.text.strip().lower() != PENDING_COMMAND:
        return False
    entries = await decisions.waiting_for(  # the tenant's own approvals, never another's
        message.user_id, platform=surface.platform, workspace=message.thread.workspace
    )
    await surface.sender.create(
        "open_id", message.user_id, "interactive", pending_card(entries, domain)
    )
    return True
