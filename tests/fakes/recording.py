"""RecordingSurface: an in-memory `Surface` that records every call, for tests and benchmarks.

Each call is kept in order as a `SurfaceCall`; tests wait on observable state with
`await surface.wait_for(predicate, timeout)` (an `asyncio.Condition`, no sleeps), or the helpers
`wait_for_card`, `wait_for_answer`, `wait_for_notice`. The latest content of every posted message
is kept too, so a test can read what the thread shows now.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bot.chat.threads import MessageRef, ThreadRef
from bot.chat.views import (
    AnswerFile,
    AnyCardView,
    ApprovalCardView,
    BatchCardView,
    CardPlace,
    StatusView,
)


@dataclass(frozen=True)
class SurfaceCall:
    """One call the runtime made: the method name and what it passed."""

    method: str
    thread: ThreadRef
    message_id: str
    payload: Any
    extra: dict[str, Any] = field(default_factory=dict)


class RecordingSurface:
    """Implements `bot.chat.surface.Surface` in memory."""

    report_poster = None  # posts no scheduled reports (tests/audit use their own poster)
    status_edit_interval_s: float | None = None  # the run manager's, as on a chat platform
    direct_messages = True  # copies to one person are recorded like any other

    def __init__(self, platform: str = "test") -> None:
        self.platform = platform
        self.calls: list[SurfaceCall] = []
        self.messages: dict[str, Any] = {}  # message id -> latest view / text
        self._ids = itertools.count(1)
        self._changed = asyncio.Condition()
        self._fail: dict[str, int] = {}
        self._holds: dict[str, list[tuple[asyncio.Event, asyncio.Event]]] = {}

    def fail_next(self, method: str, count: int = 1) -> None:
        """Make the next `count` calls of `method` raise (faults as data)."""
        self._fail[method] = self._fail.get(method, 0) + count

    def hold_next(self, method: str) -> tuple[asyncio.Event, asyncio.Event]:
        """The next call of `method` lands (is recorded) but its answer waits for `release`:
        a platform that got the message and has not answered yet. Returns (landed, release)."""
        landed, release = asyncio.Event(), asyncio.Event()
        self._holds.setdefault(method, []).append((landed, release))
        return landed, release

    async def _record(
        self, method: str, thread: ThreadRef, payload: Any, *, message_id: str = "", **extra: Any
    ) -> MessageRef:
        if self._fail.get(method):
            self._fail[method] -= 1
            raise RuntimeError(f"{method} failed (scripted)")
        message_id = message_id or f"m{next(self._ids)}"
        async with self._changed:
            self.calls.append(SurfaceCall(method, thread, message_id, payload, dict(extra)))
            if method != "notify_user":
                self.messages[message_id] = payload
            self._changed.notify_all()
        if self._holds.get(method):
            landed, release = self._holds[method].pop(0)
            landed.set()
            await release.wait()
        return MessageRef(thread, message_id)

    # --- Surface -------------------------------------------------------------------------------

    async def post_status(self, thread: ThreadRef, view: StatusView) -> MessageRef:
        return await self._record("post_status", thread, view)

    async def update_status(self, ref: MessageRef, view: StatusView) -> None:
        await self._record("update_status", ref.thread, view, message_id=ref.message_id)

    async def post_approval_card(self, thread: ThreadRef, view: AnyCardView) -> MessageRef:
        return await self._record("post_approval_card", thread, view)

    async def update_approval_card(self, ref: MessageRef, view: AnyCardView) -> None:
        await self._record("update_approval_card", ref.thread, view, message_id=ref.message_id)

    async def post_answer(
        self,
        thread: ThreadRef,
        markdown: str,
        *,
        files: Sequence[AnswerFile] = (),
        feedback_run: str = "",
    ) -> MessageRef:
        return await self._record(
            "post_answer", thread, markdown, files=tuple(files), feedback_run=feedback_run
        )

    async def post_notice(
        self, thread: ThreadRef, text: str, *, mention: Sequence[str] = ()
    ) -> MessageRef:
        return await self._record("post_notice", thread, text, mention=tuple(mention))

    async def notify_user(self, thread: ThreadRef, user_id: str, text: str) -> None:
        await self._record("notify_user", thread, text, user_id=user_id)

    async def thread_link(self, thread: ThreadRef) -> str:
        return f"test://{thread.channel}/{thread.root}"

    async def post_approval_copy(self, place: CardPlace, view: ApprovalCardView) -> MessageRef:
        where = ThreadRef(self.platform, place.workspace, f"{place.kind}:{place.target}", "")
        return await self._record("post_approval_copy", where, view)

    async def post_routed_notice(
        self, thread: ThreadRef, places: Sequence[CardPlace]
    ) -> MessageRef:
        return await self._record("post_routed_notice", thread, tuple(places))

    # --- inspection ----------------------------------------------------------------------------

    def of(self, method: str, thread: ThreadRef | None = None) -> list[SurfaceCall]:
        """Calls of one method (optionally in one thread), in order."""
        return [
            c for c in self.calls if c.method == method and (thread is None or c.thread == thread)
        ]

    def cards(self, thread: ThreadRef | None = None) -> list[ApprovalCardView]:
        """Posted approval cards, each as it looks now (after any updates); a batch card is
        each of its calls' (`batch_cards` gives the cards as posted)."""
        return [
            view
            for shown in self.batch_cards(thread)
            for view in (shown.items if isinstance(shown, BatchCardView) else (shown,))
        ]

    def batch_cards(self, thread: ThreadRef | None = None) -> list[AnyCardView]:
        """Posted approval card messages as they look now: one call's card or a batch's."""
        return [self.messages[c.message_id] for c in self.of("post_approval_card", thread)]

    def answers(self, thread: ThreadRef | None = None) -> list[str]:
        return [c.payload for c in self.of("post_answer", thread)]

    def notices(self, thread: ThreadRef | None = None) -> list[SurfaceCall]:
        return self.of("post_notice", thread)

    def status_of(self, thread: ThreadRef | None = None) -> list[StatusView]:
        """The current view of each status message (in posting order)."""
        return [self.messages[c.message_id] for c in self.of("post_status", thread)]

    async def wait_for(  # noqa: ASYNC109 - the fakes' agreed `wait_for(pred, timeout)` style
        self,
        predicate: Callable[[], Any],
        timeout: float = 10.0,  # noqa: ASYNC109
    ) -> Any:
        """Wait until `predicate()` is truthy (re-checked after every call); return its value."""

        async def _wait() -> Any:
            async with self._changed:
                while not (value := predicate()):
                    await self._changed.wait()
                return value

        return await asyncio.wait_for(_wait(), timeout)

    async def wait_for_card(
        self,
        *,
        count: int = 1,
        thread: ThreadRef | None = None,
        timeout: float = 10.0,  # noqa: ASYNC109
    ) -> ApprovalCardView:
        """Wait for the `count`-th approval card (a batch card counts each call); return it
        (current state)."""
        await self.wait_for(lambda: len(self.cards(thread)) >= count, timeout)
        return self.cards(thread)[count - 1]

    async def wait_for_card_state(
        self,
        approval_id: str,
        state: str,
        timeout: float = 10.0,  # noqa: ASYNC109
    ) -> ApprovalCardView:
        """Wait until the card of `approval_id` shows `state` (e.g. "approved", "expired")."""

        def card() -> ApprovalCardView | None:
            for view in self.cards():
                if view.approval_id == approval_id and view.state == state:
                    return view
            return None

        return await self.wait_for(card, timeout)

    async def wait_for_answer(
        self,
        *,
        count: int = 1,
        thread: ThreadRef | None = None,
        timeout: float = 10.0,  # noqa: ASYNC109
    ) -> str:
        await self.wait_for(lambda: len(self.of("post_answer", thread)) >= count, timeout)
        return self.answers(thread)[count - 1]

    async def wait_for_notice(
        self,
        *,
        count: int = 1,
        thread: ThreadRef | None = None,
        timeout: float = 10.0,  # noqa: ASYNC109
    ) -> SurfaceCall:
        await self.wait_for(lambda: len(self.of("post_notice", thread)) >= count, timeout)
        return self.notices(thread)[count - 1]
