"""InterruptQueue: replies that arrive while a run is working, drained between iterations."""

from __future__ import annotations

from collections import deque


class InterruptQueue:
    """Per-conversation buffer of user messages; the engine drains it at safe points.

    Not an asyncio.Queue: the engine never waits on it, it only takes what is there.
    """

    def __init__(self) -> None:
        self._pending: deque[str] = deque()

    def put(self, text: str) -> None:
        """Queue one reply (called by the runtime when a message lands in an active thread)."""
        if text.strip():
            self._pending.append(text)

    def drain(self) -> list[str]:
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
