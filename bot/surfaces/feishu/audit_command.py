"""The chat audit command on Feishu: `audit 7d [connector] [share]` to the bot, answered without
the model, for audit viewers only: the report goes to the viewer by direct message, or is posted
in the thread with `share`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bot.chat.audit_report import Place
from bot.chat.ports import AuditCommand
from bot.chat.threads import InboundMessage
from bot.surfaces.feishu.audit_report import feishu_card

if TYPE_CHECKING:
    from bot.surfaces.feishu.surface import FeishuSurface


async def answer_audit_command(
    surface: FeishuSurface, audit: AuditCommand | None, message: InboundMessage
) -> bool:
    """True when `message` was an audit command (answered here); False: it is for the agent."""
    words = message.text.split(maxsplit=1)
    # only "audit ..." here: a chat message that merely starts with "7d" is for the agent
    if audit is None or not words or words[0].lower() != "audit":
        return False
    # the tenant it was asked in: whose audit viewers apply, and with several apps the only
    # tenant the report covers
    thread = message.thread
    place = Place(
        surface.platform, thread.channel, direct=message.direct, workspace=thread.workspace
    )
    reply = await audit(message.user_id, message.text, place)
    if reply is None:
        return False
    if reply.kind == "report" and reply.report is not None and reply.shared:
        await surface.post_audit_report(message.thread.channel, reply.report, thread=message.thread)
    elif reply.kind == "report" and reply.report is not None:
        card = feishu_card(reply.report)
        await surface.sender.create("open_id", message.user_id, "interactive", card)
    else:
        await surface.notify_user(message.thread, message.user_id, reply.message)
    return True
