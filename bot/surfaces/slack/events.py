"""Slack's Events API envelopes, read: which events are a person writing to the runtime."""

from __future__ import annotations

from typing import Any

from bot.chat.threads import InboundMessage, ThreadRef
from bot.surfaces.slack.clicks import PLATFORM
from bot.surfaces.slack.markdown import mentions, strip_mention, unescape

# Message subtypes that are a person writing; everything else (edits, deletions, joins, bot
# posts) is ignored.
_USER_SUBTYPES = frozenset({"thread_broadcast", "file_share"})


def parse_event(body: dict[str, Any], bot_user_id: str) -> InboundMessage | None:
    """An Events API envelope -> `InboundMessage`, or None when it is not for the runtime.

    A mention in a channel arrives twice (`app_mention` and `message`); the `message` copy is
    dropped. In a DM every message is addressed to the bot; in a channel only thread replies
    are passed on (the runtime ignores threads the bot is not part of).
    """
    event = body.get("event")
    if not isinstance(event, dict):
        return None
    kind = event.get("type")
    user, text, ts, channel = (event.get(k) for k in ("user", "text", "ts", "channel"))
    thread_ts = event.get("thread_ts") or ""
    team, event_id = body.get("team_id"), body.get("event_id")
    fields = (user, text, ts, channel, thread_ts, team, event_id)
    if not all(isinstance(f, str) for f in fields) or not (user and ts and channel and event_id):
        return None  # malformed: every field the runtime keys on must be a non-empty string
    if event.get("bot_id") or user == bot_user_id:
        return None
    if event.get("subtype") and event["subtype"] not in _USER_SUBTYPES:
        return None
    if event.get("edited"):  # an edited mention is re-sent as app_mention: not a new request
        return None
    if kind == "app_mention":
        addressed = True
    elif kind == "message":
        if event.get("channel_type") == "im":
            addressed = True
        elif mentions(text, bot_user_id) or not thread_ts or thread_ts == ts:
            return None
        else:
            addressed = False
    else:
        return None
    return InboundMessage(
        thread=ThreadRef(PLATFORM, team, channel, thread_ts or ts),
        event_id=event_id,
        user_id=user,
        text=unescape(strip_mention(text, bot_user_id)),
        message_id=ts,
        mentions_bot=addressed,
        direct=event.get("channel_type") == "im" or channel.startswith("D"),
    )
