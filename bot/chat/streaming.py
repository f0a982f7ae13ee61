"""The answer streamed into the thread as it is written: one pacing shared by every platform.

The synthesis emits deltas far faster than a platform takes edits. `PacedStream` buffers them
and hands its `StreamTransport` (Slack's chat streams, Feishu's CardKit card) at most one
update per `interval_s`: the first text at once (the first token is on screen within one API
call), then whatever arrived meanwhile in one call. The model's stream never waits for the
platform: `push` only appends to the buffer.

A synthesis that breaks after some text (`reset`) voids what was shown: nothing more is sent,
and `finish` hands the transport the fallback answer, which replaces the partial text in the
same message (never both). `finish` also gets what a stream could not show (text past the
transport's `capacity`, a stream that failed part-way): the transport ends its message with
the whole answer, splitting a long one as its plain post does.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from bot.chat.threads import MessageRef, ThreadRef
from bot.chat.views import AnswerFile

log = logging.getLogger(__name__)

STREAM_INTERVAL_S = 1.0  # at most one append a second per stream (DESIGN §4)


class StreamTransport(Protocol):
    """One streamed answer message on one platform."""

    capacity: int  # the most characters the message is streamed (the rest comes at `finish`)

    async def send(self, shown: str, new: str) -> None:
        """Show `new` after what is already shown (`shown` holds both: the whole text so far).
        The first call starts the message. Raise when the platform refuses."""
        ...

    async def finish(
        self,
        answer: str,
        *,
        streamed: str,
        intact: bool,
        files: Sequence[AnswerFile],
        feedback_run: str,
    ) -> MessageRef:
        """End the message with the whole `answer`. `streamed`: what was shown; `intact`: the
        shown text is the answer's beginning (no reset, no failed send), so only the rest is
        missing. Returns the message carrying the feedback buttons."""
        ...

    async def abandon(self, streamed: str, note: str) -> None:
        """The run ended without an answer (stopped, failed): end the message with `note`."""
        ...


@runtime_checkable
class StreamingSurface(Protocol):
    """A surface that can stream answers; `open_answer_stream` says None where it cannot (the
    workspace lacks the feature: the answer is then posted once)."""

    async def open_answer_stream(
        self, thread: ThreadRef, *, recipient: str
    ) -> StreamTransport | None: ...


class PacedStream:
    """Deltas in, at most one transport update per interval out (see the module docstring)."""

    def __init__(
        self, transport: StreamTransport, *, interval_s: float = STREAM_INTERVAL_S
    ) -> None:
        self._transport = transport
        self._interval = interval_s
        self._text = ""
        self._shown = 0  # characters of `_text` the platform has
        self._intact = True  # what is shown is the answer's beginning
        self._closed = False
        self._dirty = asyncio.Event()
        self._last_send = 0.0
        self._sending = False  # an update is on its way to the platform
        self._task: asyncio.Task[None] | None = None
        self.sends = 0

    @property
    def shown(self) -> str:
        return self._text[: self._shown]

    def push(self, delta: str) -> None:
        """One delta of the answer (cheap: the flusher sends it)."""
        if self._closed or not self._intact or not delta:
            return
        self._text += delta
        if self._task is None:
            self._task = asyncio.create_task(self._flush_loop(), name="answer-stream")
        self._dirty.set()

    def reset(self) -> None:
        """The synthesis broke: what was shown is void; `finish` replaces it."""
        self._intact = False
        self._dirty.set()

    async def finish(
        self, answer: str, *, files: Sequence[AnswerFile] = (), feedback_run: str = ""
    ) -> MessageRef:
        await self._stop_flushing()
        streamed = self.shown
        intact = self._intact and answer.startswith(streamed)
        return await self._transport.finish(
            answer, streamed=streamed, intact=intact, files=files, feedback_run=feedback_run
        )

    async def abandon(self, note: str) -> None:
        await self._stop_flushing()
        if self._shown:
            await self._transport.abandon(self.shown, note)

    async def _stop_flushing(self) -> None:
        """No more sends. The first update completes if it is under way (it starts the
        message); any later one is let go, waiting for its turn or in flight: `finish`
        replaces the whole message anyway."""
        self._closed = True
        self._dirty.set()
        if self._task is None:
            return
        if self.sends or not self._sending:
            self._task.cancel()
        await asyncio.gather(asyncio.shield(self._task), return_exceptions=True)

    async def _flush_loop(self) -> None:
        while True:
            await self._dirty.wait()
            if self._closed or not self._intact:
                return
            pause = self._last_send + self._interval - time.monotonic()
            if pause > 0 and self.sends:
                await asyncio.sleep(pause)  # the rate limit, not synchronisation
            self._dirty.clear()
            if self._closed or not self._intact:
                return
            limit = self._transport.capacity
            upto = min(len(self._text), limit)
            if upto <= self._shown:
                if len(self._text) >= limit or self._closed:
                    return  # the message is full: the rest comes with `finish`
                continue
            new = self._text[self._shown : upto]
            self._sending = True
            try:
                await self._transport.send(self._text[:upto], new)
            except Exception as exc:  # noqa: BLE001 - the answer still comes whole with `finish`
                # a refused start (e.g. `not_allowed`) showed nothing: the answer is posted
                # whole; a stream that broke part-way is replaced by it
                what = "broke" if self.sends else "could not start"
                log.warning("the answer stream %s (%s); the answer will be posted whole",
                            what, type(exc).__name__)  # fmt: skip
                log.debug("the answer stream %s", what, exc_info=True)
                self._intact = False
                return
            finally:
                self._sending = False
            self._shown = upto
            self.sends += 1
            self._last_send = time.monotonic()
            if self._closed:
                return
