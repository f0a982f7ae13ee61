"""The status reporter: step events -> one status message per run, edited in place.

Events only update the reporter's latest state; one flusher task per message sends it, so there
is never more than one edit in flight, at most one edit per `min_interval_s` (longer while edits
queue for the platform's budget), and the last state is always the one shown. (The approval
card's view model is in `bot/approvals/cards.py`.)
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

from bot.engine.events import (
    AnswerStart,
    Done,
    IterationDone,
    IterationStart,
    Phase,
    ThinkingStart,
    TokenUsage,
)
from bot.runs.types import ApprovalEnded, ApprovalWaiting, RunEvent
from bot.surfaces.base import (
    MessageRef,
    RunState,
    StatusStep,
    StatusView,
    StepState,
    Surface,
    ThreadRef,
)

log = logging.getLogger(__name__)

MAX_EDIT_ATTEMPTS = 3  # consecutive failed edits of one state before waiting for a new one


@dataclass
class _Step:
    label: str
    state: StepState
    started: float
    elapsed: float | None = None
    detail: str = ""


class StatusReporter:
    """One run's status message. Feed it with `on_event`; end it with `finish`."""

    def __init__(self, surface: Surface, thread: ThreadRef, *, min_interval_s: float = 1.0) -> None:
        """`min_interval_s`: the least time between two edits of the message (1 s in production)."""
        self._surface = surface
        self._thread = thread
        self._interval = min_interval_s
        self._steps: dict[str, _Step] = {}
        self._headline = "Working on it"
        self._state: RunState = "running"
        self._totals = ""
        self._usage = TokenUsage()
        self._started = time.monotonic()
        self._ref: MessageRef | None = None
        self._dirty = asyncio.Event()
        self._final = False
        self._last_edit = 0.0
        self._task: asyncio.Task[None] | None = None
        self.edits = 0

    @property
    def ref(self) -> MessageRef | None:
        return self._ref

    async def open(self, existing: MessageRef | None = None) -> MessageRef:
        """Post the status message, or take over an existing one (a resumed run)."""
        if existing is None:
            self._ref = await self._surface.post_status(self._thread, self.view())
            self._last_edit = time.monotonic()
        else:
            self._ref = existing
            self._dirty.set()
        self._task = asyncio.create_task(self._flush_loop(), name="status-flusher")
        return self._ref

    def on_event(self, event: RunEvent) -> None:
        """Fold one event into the latest state (cheap, synchronous; the flusher sends it)."""
        if self._final or not self._apply(event):
            return
        self._dirty.set()

    def _apply(self, event: RunEvent) -> bool:
        now = time.monotonic()
        if isinstance(event, ThinkingStart):
            return self._set_headline("Thinking")
        if isinstance(event, Phase) and event.phase == "selecting_tools":
            return self._set_headline("Choosing tools")
        if isinstance(event, IterationStart):
            key = event.tool_call_id or f"{event.iteration}:{event.tool_name}"
            self._steps[key] = _Step(event.tool_name, "running", now)
            self._headline = f"Running {event.tool_name}"
            return True
        if isinstance(event, IterationDone):
            step = self._step(event.tool_call_id or f"{event.iteration}:{event.tool_name}", event)
            step.state = "blocked" if event.blocked else "failed" if event.error else "done"
            step.elapsed = event.iter_elapsed or (now - step.started)
            self._headline = "Working on it"
            return True
        if isinstance(event, ApprovalWaiting):
            step = self._steps.get(event.tool_call_id)
            if step is None:
                step = self._steps[event.tool_call_id] = _Step(event.tool_name, "running", now)
            step.state, step.detail = "waiting_approval", "waiting for approval"
            self._state, self._headline = "waiting_approval", "Waiting for approval"
            return True
        if isinstance(event, ApprovalEnded):
            step = self._steps.get(event.tool_call_id)
            if step is not None:
                step.detail = _approval_detail(event)
                step.state = "running" if event.status == "approved" else "blocked"
            if not any(s.state == "waiting_approval" for s in self._steps.values()):
                self._state, self._headline = "running", "Working on it"
            return True
        if isinstance(event, AnswerStart):
            return self._set_headline("Writing the answer")
        if isinstance(event, Done):
            self._usage = event.usage
            return False
        return False

    def _step(self, key: str, event: IterationDone) -> _Step:
        step = self._steps.get(key)
        if step is None:
            step = self._steps[key] = _Step(event.tool_name, "running", time.monotonic())
        return step

    def _set_headline(self, text: str) -> bool:
        changed = self._headline != text
        self._headline = text
        return changed

    def view(self) -> StatusView:
        now = time.monotonic()
        steps = tuple(
            StatusStep(
                label=s.label,
                state=s.state,
                elapsed_s=round(s.elapsed if s.elapsed is not None else now - s.started, 1),
                detail=s.detail,
            )
            for s in self._steps.values()
        )
        return StatusView(
            state=self._state, steps=steps, headline=self._headline, totals=self._totals
        )

    async def finish(
        self,
        state: RunState,
        *,
        headline: str,
        iterations: int = 0,
        usage: TokenUsage | None = None,
    ) -> None:
        """Show the final state with a totals line, then stop the flusher once it is sent."""
        if usage is not None:
            self._usage = usage
        for step in self._steps.values():
            if step.state in ("running", "waiting_approval"):
                step.state = "failed" if state in ("failed", "cancelled") else "done"
                step.elapsed = time.monotonic() - step.started
        self._state, self._headline = state, headline
        self._totals = totals_line(
            tools=len(self._steps),
            iterations=iterations,
            tokens=self._usage.total_tokens,
            elapsed_s=time.monotonic() - self._started,
        )
        self._final = True
        self._dirty.set()
        if self._task is not None:
            await asyncio.shield(self._task)

    async def close(self) -> None:
        """Stop the flusher without a final edit (shutdown: the run will resume elsewhere)."""
        if self._task is not None and not self._task.done():
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _flush_loop(self) -> None:
        failures = 0
        stretch = 0.0  # how long the last edit waited for the platform's edit budget
        while True:
            await self._dirty.wait()
            # an edit that queued for a short budget spaces the next one as far apart, so the
            # states in between coalesce into one edit; the final state never waits for that
            interval = self._interval if self._final else max(self._interval, stretch)
            pause = self._last_edit + interval - time.monotonic()
            if pause > 0:
                await asyncio.sleep(pause)  # the rate limit, not synchronisation
            self._dirty.clear()
            if self._ref is not None:
                try:
                    began = time.monotonic()
                    await self._surface.update_status(self._ref, self.view())
                    stretch = time.monotonic() - began
                    self.edits += 1
                    failures = 0
                except Exception:  # noqa: BLE001 - retried below; the run goes on regardless
                    log.exception("status edit failed for %s", self._ref.message_id)
                    failures += 1
                    if failures < MAX_EDIT_ATTEMPTS:
                        self._dirty.set()  # try the latest state again after the interval
            self._last_edit = time.monotonic()
            if self._final and not self._dirty.is_set():
                return


def totals_line(*, tools: int, iterations: int, tokens: int, elapsed_s: float) -> str:
    calls = "1 tool call" if tools == 1 else f"{tools} tool calls"
    return f"{calls} · {iterations} iterations · {tokens:,} tokens · {elapsed_s:.1f}s"


def _approval_detail(event: ApprovalEnded) -> str:
    who = ", ".join(event.decided_by)
    if event.status in ("approved", "rejected"):
        return f"{event.status} by {who}" if who else event.status
    return event.status
