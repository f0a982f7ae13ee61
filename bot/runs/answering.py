"""The run's answer into its thread: streamed as it is written where the surface can, else
posted once the synthesis is done (with the feedback buttons either way).

`AnswerDelivery` listens to the synthesis' answer events: deltas go to a `PacedStream` (at
most one platform update a second), a `reset` voids what was shown (the fallback replaces it
in `deliver`). A surface that cannot stream here (`open_answer_stream` says None: the
workspace lacks the feature) gets today's single post.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from bot.chat.events import RunEvent
from bot.chat.streaming import STREAM_INTERVAL_S, PacedStream, StreamingSurface
from bot.chat.surface import Surface
from bot.chat.threads import MessageRef, ThreadRef
from bot.chat.views import AnswerFile
from bot.engine.artifacts import Artifact
from bot.engine.events import AnswerDelta, AnswerReset

log = logging.getLogger(__name__)


class AnswerDelivery:
    """One run's answer: `open()`, feed `on_event`, then `deliver()` (or `abandon()`)."""

    def __init__(
        self,
        surface: Surface,
        thread: ThreadRef,
        *,
        run_id: str,
        recipient: str,
        interval_s: float = STREAM_INTERVAL_S,
    ) -> None:
        """`interval_s`: least time between two updates of the streamed answer."""
        self._surface = surface
        self._interval = interval_s
        self._thread = thread
        self._run_id = run_id
        self._recipient = recipient
        self._stream: PacedStream | None = None

    async def open(self) -> None:
        """Ready a stream if the surface offers one here (never raises: a surface that cannot
        say gets the plain post)."""
        if not isinstance(self._surface, StreamingSurface):
            return
        try:
            transport = await self._surface.open_answer_stream(
                self._thread, recipient=self._recipient
            )
        except Exception:  # noqa: BLE001 - the answer is then posted once
            log.warning("could not open an answer stream; posting the answer", exc_info=True)
            return
        if transport is not None:
            self._stream = PacedStream(transport, interval_s=self._interval)

    def on_event(self, event: RunEvent) -> None:
        if self._stream is None:
            return
        if isinstance(event, AnswerDelta):
            self._stream.push(event.content)
        elif isinstance(event, AnswerReset):
            self._stream.reset()

    async def deliver(self, answer: str, files: Sequence[AnswerFile]) -> MessageRef:
        """The whole answer in the thread; the message that carries its feedback buttons."""
        if self._stream is not None:
            ref = await self._stream.finish(answer, files=files, feedback_run=self._run_id)
            self._stream = None  # delivered: nothing is left to abandon
            return ref
        return await self._surface.post_answer(
            self._thread, answer, files=files, feedback_run=self._run_id
        )

    async def abandon(self, note: str) -> None:
        """No answer will come (stopped, failed): a half-streamed message ends with `note`."""
        if self._stream is None:
            return
        stream, self._stream = self._stream, None  # once
        try:
            await stream.abandon(note)
        except Exception:  # noqa: BLE001 - the run's ending is told in the thread anyway
            log.warning("could not end the half-streamed answer", exc_info=True)


def answer_files(artifacts: Sequence[Artifact]) -> tuple[AnswerFile, ...]:
    """The documents a run's tools produced, as the files its answer carries."""
    return tuple(AnswerFile(a.name, a.content_type, a.content) for a in artifacts)
