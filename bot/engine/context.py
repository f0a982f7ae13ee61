"""ContextGuard: keep the loop's messages inside the token budget, never dropping pinned ones.

The guard plans what goes; `bot.engine.compaction` has the model summarise it (the seed's
compaction LLM), or falls back to `drop_note` here when that call fails.

No tokenizer is downloaded: tokens are estimated at about four characters each, anchored on the
API's own `prompt_tokens` for the prefix it last saw when the server reports usage. Compaction
works on *units* (a plain message, or an assistant `tool_calls` message together with its tool
results) so a tool result is never separated from the call that produced it.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bot.engine import prompts

Message = dict[str, Any]
CHARS_PER_TOKEN = 4
MESSAGE_OVERHEAD_TOKENS = 4
IMAGE_TOKENS = 1000  # what one image part costs, about (OpenAI: 85 to ~1,100 by detail and size)


def estimate_message(message: Message) -> int:
    """Rough token count of one message (content + tool call arguments + framing)."""
    content = message.get("content")
    chars = len(prompts.content_text(content))
    images = prompts.image_parts(content) * IMAGE_TOKENS
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        chars += len(function.get("name", "")) + len(function.get("arguments", ""))
    return chars // CHARS_PER_TOKEN + images + MESSAGE_OVERHEAD_TOKENS


def estimate_tokens(messages: Sequence[Message]) -> int:
    return sum(estimate_message(message) for message in messages)


@dataclass(frozen=True)
class Compaction:
    messages: list[Message]
    pinned: set[int]
    original: int
    kept: int


@dataclass(frozen=True)
class CompactionPlan:
    """Which messages go: `units` are the message groups, `keep[i]` says whether unit i stays.

    The dropped messages are summarised (by the model, or the drop-and-note fallback) and the
    summary takes the place of the first dropped unit.
    """

    messages: list[Message]
    pinned: set[int]
    units: list[list[int]]
    keep: list[bool]
    tokens_before: int

    @property
    def dropped(self) -> list[Message]:
        return [
            self.messages[position]
            for unit, kept in zip(self.units, self.keep, strict=True)
            if not kept
            for position in unit
        ]

    def apply(self, summary: Message) -> Compaction:
        """The messages with the dropped units replaced by `summary`; pinned indexes follow."""
        new_messages: list[Message] = []
        new_pinned: set[int] = set()
        summary_placed = False
        for unit, kept in zip(self.units, self.keep, strict=True):
            if not kept:
                if not summary_placed:
                    new_messages.append(summary)
                    summary_placed = True
                continue
            for position in unit:
                if position in self.pinned:
                    new_pinned.add(len(new_messages))
                new_messages.append(self.messages[position])
        return Compaction(new_messages, new_pinned, len(self.messages), len(new_messages))


class ContextGuard:
    """Checks the budget before every model call and plans the compaction of older turns when it
    is exceeded (pinned messages, the system prompt and the latest turn always stay).

    One guard per run: it remembers the API's last reported prompt size.
    """

    def __init__(self, budget_tokens: int, *, keep_recent_ratio: float = 0.5) -> None:
        self.budget_tokens = budget_tokens
        self.keep_recent_tokens = int(budget_tokens * keep_recent_ratio)
        self._reported: tuple[int, int] | None = None  # (message count, prompt_tokens)

    def note_usage(self, message_count: int, prompt_tokens: int) -> None:
        """The server said the first `message_count` messages cost `prompt_tokens`."""
        if prompt_tokens > 0:
            self._reported = (message_count, prompt_tokens)

    def forget_usage(self) -> None:
        """The messages changed under the reported prefix (a compaction): estimate again."""
        self._reported = None

    def estimate(self, messages: Sequence[Message]) -> int:
        if self._reported is not None and self._reported[0] <= len(messages):
            count, tokens = self._reported
            return tokens + estimate_tokens(messages[count:])
        return estimate_tokens(messages)

    def plan(self, messages: list[Message], pinned: set[int]) -> CompactionPlan | None:
        """None when within budget (or nothing can go); otherwise what to drop."""
        before = self.estimate(messages)
        if before <= self.budget_tokens:
            return None
        units = _units(messages)
        keep = [False] * len(units)
        for index, unit in enumerate(units):
            if (
                any(position in pinned for position in unit)
                or messages[unit[0]]["role"] == "system"
            ):
                keep[index] = True
        budget = self.keep_recent_tokens
        for index in range(len(units) - 1, -1, -1):
            cost = sum(estimate_message(messages[position]) for position in units[index])
            if keep[index]:
                continue
            if cost > budget and index != len(units) - 1:
                break
            keep[index] = True
            budget -= cost
        if all(keep):
            return None
        return CompactionPlan(messages, set(pinned), units, keep, before)


def _units(messages: Sequence[Message]) -> list[list[int]]:
    """Indexes grouped so an assistant tool_calls message stays with its tool results."""
    units: list[list[int]] = []
    for index, message in enumerate(messages):
        if message.get("role") == "tool" and units:
            units[-1].append(index)
        else:
            units.append([index])
    return units


def drop_note(dropped: Sequence[Message]) -> str:
    """A deterministic note of what was compacted (no model call): the fallback summary."""
    calls = []
    for message in dropped:
        for call in message.get("tool_calls") or ():
            calls.append((call.get("function") or {}).get("name", "?"))
        content = message.get("content")
        if (
            message.get("role") == "assistant"
            and isinstance(content, str)
            and '"tool_name"' in content
        ):
            with contextlib.suppress(ValueError, AttributeError):
                calls.append(str(json.loads(content).get("tool_name", "?")))
    called = f" Tools called in that part: {', '.join(calls[:30])}." if calls else ""
    return prompts.COMPACTED.format(count=len(dropped), called=called)
