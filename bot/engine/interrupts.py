"""InterruptQueue: replies that arrive while a run is working, drained between iterations.

Each reply keeps its author: once the engine drains a reply into the model's context, its author
is one of the run's requesters (whoever the model has read may have asked for what it does next).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass


@dataclass(frozen=True)
class Interrupt:
    """One queued reply and who wrote it (a platform user id; empty when unknown)."""

    text: str
    author: str = ""


class InterruptQueue:
    """Per-conversation buffer of user messages; the engine drains it at safe points.

    Not an asyncio.Queue: the engine never waits on it, it only takes what is there.
    """

    def __init__(self) -> None:
        self._pending: deque[Interrupt] = deque()

    def put(self, text: str, author: str = "") -> None:
        """Queue one reply (called by the runtime when a message lands in an active thread)."""
        if text.strip():
            self._pending.append(Interrupt(text, author))

    def drain(self) -> list[Interrupt]:
        """Take every queued reply, oldest first."""
        items = list(self._pending)
        self._pending.clear()
        return items

    def __len__(self) -> int:
        return len(self._pending)


def combine_interrupts(texts: list[str]) -> str:
    """Several replies from one drain become one `[USER INTERRUPT]` message (DESIGN §2)."""
    body = "\n".join(f"- {text}" for text in texts) if len(texts) > 1 else texts[0]
    return (
        "[USER INTERRUPT] The user sent new message(s) while you were working. "
        "Read them and take them into account before your next step:\n" + body
    )
