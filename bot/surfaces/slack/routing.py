"""Slack's side of approval routing: the thread's permalink, card copies in an approvals channel
or an approver's DM (conversations.open), and the thread's "waiting for approval in #channel"."""

from __future__ import annotations

from collections.abc import Sequence

from slack_sdk.web.async_client import AsyncWebClient

from bot.chat.views import CardPlace
from bot.surfaces.slack.render import SlackMessage, section


async def permalink(client: AsyncWebClient, channel: str, ts: str) -> str:
    """chat.getPermalink of the thread's root message."""
    response = await client.chat_getPermalink(channel=channel, message_ts=ts)
    return str(response.get("permalink") or "")


async def copy_channel(client: AsyncWebClient, place: CardPlace) -> str:
    """The channel a copy goes to: the approvals channel, or the DM opened with the approver."""
    if place.kind == "channel":
        return place.target
    opened = await client.conversations_open(users=place.target)
    channel = opened.get("channel") or {}
    return str(channel.get("id") or "")


def routed_notice(places: Sequence[CardPlace]) -> SlackMessage:
    """The thread's note: where its approval card went (channels linked as `<#C..>`)."""
    channels = [p.target for p in places if p.kind == "channel"]
    if channels:
        where = ", ".join(f"<#{c}>" for c in channels)
        text = f"Waiting for approval in {where}."
    else:
        text = (
            f"Waiting for approval: the card went to {len(places)} approver(s) by direct message."
        )
    return SlackMessage(text=text, blocks=[section(text)])
