"""Compaction by the model: one call summarises what the dropped messages established.

The seed compacts with a compaction LLM instructed to keep the recent reasoning chain. Dropping
old turns with a fixed note loses the facts of their observations, so the agent calls the same
tools again (and a mutating call asks for a new approval). Here the messages the `ContextGuard`
plans to drop go to one plain model call (the run's model, or a cheaper one) that writes down
the facts, ids, decisions and approval outcomes; the summary takes their place. Pinned messages
never go. Only when that call fails does the run fall back to the drop-and-note.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from bot.engine import prompts
from bot.engine.context import CHARS_PER_TOKEN, Compaction, CompactionPlan, drop_note
from bot.engine.events import TokenUsage
from bot.engine.llm import LLM, LLMError, Message

log = logging.getLogger(__name__)

MESSAGE_CHARS = 4000  # one message's share of the compaction prompt
SUMMARY_SHARE = 4  # the summary may use at most 1/SUMMARY_SHARE of the context budget


@dataclass(frozen=True)
class CompactionOutcome:
    """The compacted messages, the cost of the compaction call, and whether the model wrote
    the summary (False: the drop-and-note fallback)."""

    compaction: Compaction
    usage: TokenUsage
    summarized: bool


async def compact(
    llm: LLM, plan: CompactionPlan, *, query: str, budget_tokens: int
) -> CompactionOutcome:
    """Summarise `plan.dropped` with one model call; the drop-and-note when the call fails."""
    request = [
        prompts.system(prompts.COMPACTION_SYSTEM),
        prompts.user(
            prompts.COMPACTION_REQUEST.format(
                query=query, transcript=transcript(plan.dropped, budget_tokens * CHARS_PER_TOKEN)
            )
        ),
    ]
    try:
        reply = await llm.chat(request)
    except LLMError as exc:
        log.warning("compaction call failed (%s); dropping old messages with a note", exc)
        return CompactionOutcome(_fallback(plan), TokenUsage(), summarized=False)
    summary = (reply.content or "").strip()
    if not summary:
        log.warning("compaction call returned no text; dropping old messages with a note")
        return CompactionOutcome(_fallback(plan), reply.usage, summarized=False)
    limit = budget_tokens * CHARS_PER_TOKEN // SUMMARY_SHARE
    if len(summary) > limit:
        summary = summary[:limit] + " [...summary cut]"
    message = prompts.user(prompts.COMPACTED_SUMMARY.format(summary=summary))
    return CompactionOutcome(plan.apply(message), reply.usage, summarized=True)


def _fallback(plan: CompactionPlan) -> Compaction:
    return plan.apply(prompts.user(drop_note(plan.dropped)))


def transcript(messages: Sequence[Message], max_chars: int) -> str:
    """The dropped messages as text for the compaction call: each one cut to MESSAGE_CHARS,
    the newest kept when the whole is over `max_chars` (the recent chain matters most)."""
    lines = [_line(message) for message in messages]
    total = 0
    kept: list[str] = []
    for line in reversed(lines):
        total += len(line) + 2
        if total > max_chars and kept:
            kept.append(f"({len(lines) - len(kept)} earlier messages left out)")
            break
        kept.append(line)
    return "\n\n".join(reversed(kept))


def _line(message: Message) -> str:
    role = str(message.get("role") or "?")
    content = message.get("content")
    text = prompts.content_text(content)
    parts = [text] if text else []
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        parts.append(f"calls {function.get('name', '?')}({function.get('arguments', '')})")
    if role == "tool":
        role = f"tool result {message.get('tool_call_id', '')}".rstrip()
    body = "\n".join(parts) or "(empty)"
    if len(body) > MESSAGE_CHARS:
        body = body[:MESSAGE_CHARS] + " [...cut]"
    return f"[{role}] {body}"
