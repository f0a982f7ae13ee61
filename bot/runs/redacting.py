"""A run's events with every known secret masked, before anything shows them.

The runner wraps its one `emit` (status message, streamed answer, console listeners) in
`RedactingEmit`: each event's text and arguments are masked with the process's `Redactor`; the
answer's deltas go through a `StreamRedaction`, which holds back a piece's end that could be
the start of a secret until the next delta (or `AnswerDone`) shows what it is, so a secret the
model splits across two chunks never reaches a thread or the console.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from bot.chat.events import RunEvent
from bot.engine.events import AnswerDelta, AnswerDone, AnswerReset, AnswerStart
from bot.redaction import Redactor, StreamRedaction

Emit = Callable[[RunEvent], Awaitable[None]]


class RedactingEmit:
    """`emit` with secrets masked (see the module docstring); one per run."""

    def __init__(self, emit: Emit, redactor: Redactor) -> None:
        self._emit = emit
        self._redactor = redactor
        self._answer: StreamRedaction = redactor.stream()

    async def __call__(self, event: RunEvent) -> None:
        if isinstance(event, AnswerStart):
            self._answer = self._redactor.stream()
        elif isinstance(event, AnswerDelta):
            shown = self._answer.push(event.content)
            if shown:
                await self._emit(AnswerDelta(shown))
            return
        elif isinstance(event, AnswerReset):
            self._answer = self._redactor.stream()  # what was held back is void too
        elif isinstance(event, AnswerDone) and (rest := self._answer.flush()):
            await self._emit(AnswerDelta(rest))
        await self._emit(self.masked(event))

    def masked(self, event: RunEvent) -> RunEvent:
        """The event with every known secret in its text and arguments replaced."""
        if not dataclasses.is_dataclass(event):
            return event
        changes: dict[str, Any] = {}
        for item in dataclasses.fields(event):
            value = getattr(event, item.name)
            if isinstance(value, str) and item.name != "type":
                changes[item.name] = self._redactor.known_text(value)
            elif isinstance(value, Mapping | list | tuple):
                changes[item.name] = self._redactor.mask(value)
        return dataclasses.replace(event, **changes) if changes else event
