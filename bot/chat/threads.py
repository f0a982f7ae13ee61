"""Where a conversation happens: thread and message keys, and one inbound user message.

These are the domain keys every layer above storage speaks: a surface parses a platform event
into an `InboundMessage` on a `ThreadRef`; the inbox stores it, the run manager keys its runs by
the thread, and a `MessageRef` says which posted message to edit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from bot.clock import utcnow


@dataclass(frozen=True)
class ThreadRef:
    """A conversation's key: Slack (team, channel, thread_ts or ts); Feishu (tenant, chat, root)."""

    platform: str
    workspace: str
    channel: str
    root: str


@dataclass(frozen=True)
class MessageRef:
    """Where a message the bot posted lives, so it can be edited in place."""

    thread: ThreadRef
    message_id: str


@dataclass(frozen=True, kw_only=True)
class InboundMessage:
    """One user message, already verified and parsed by its surface."""

    thread: ThreadRef
    event_id: str
    user_id: str
    text: str
    message_id: str = ""
    mentions_bot: bool = True
    direct: bool = False  # a direct message to the bot (only this user sees the conversation)
    # the only connectors a run this message starts may use (a trigger's list); None: every one
    connectors: tuple[str, ...] | None = None
    received_at: datetime = field(default_factory=utcnow)
