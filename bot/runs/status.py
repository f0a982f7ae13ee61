"""The status reporter: step events -> one status message per run, edited in place.

Events only update the reporter's latest state; one flusher task per message sends it, so there
is never more than one edit in flight, at most one edit per `min_interval_s` (longer while edits
queue for the platform's budget), and the last state is always the one shown. (The approval
card's view model is in `bot/approvals/cards.py`.)
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bot.chat.events import (
    ApprovalEnded,
    ApprovalWaiting,
    CredentialEnded,
    CredentialWaiting,
    RunEvent,
)
from bot.chat.surface import Surface
from bot.chat.threads import MessageRef, ThreadRef
from bot.chat.views import StatusState, StatusStep, StatusView, StepState
from bot.engine.events import (
    AnswerStart,
    Done,
    IterationDone,
    IterationStart,
    Phase,
    ThinkingStart,
    TokenUsage,
    ToolProgress,
)
from bot.redaction import redact, redact_text
from bot.statuses import ApprovalStatus, RunStatus

log = logging.getLogger(__name__)

MAX_EDIT_ATTEMPTS = 3  # consecutive failed edits of one state before waiting for a new one
SUMMARY_CHARS = 300  # a step's arguments and output, as a plan task shows them
TITLE_CHARS = 200  # the request, as a platform's session title shows it


def queued_headline(ahead: int) -> str:
    """What a queued run's status says: its place in line."""
    return "Queued: next in line" if ahead == 0 else f"Queued: {ahead} ahead of you"


@dataclass
class _Step:
    label: str
    state: StepState
    started: float
    elapsed: float | None = None
    detail: str = ""
    key: str = ""
    arguments: str = ""
    output: str = ""
    approval: str = ""
    progress: str = ""  # how far the running call got (the tool's own report)


class StatusReporter:
    """One run's status message. Feed it with `on_event`; end it with `finish`."""

    def __init__(
        self,
        surface: Surface,
        thread: ThreadRef,
        *,
        min_interval_s: float = 1.0,
        run_id: str = "",
        requester: str = "",
        title: str = "",
        secrets: Sequence[str] = (),
        tool_secrets: Callable[[str], Iterable[str]] = lambda name: (),
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    ) -> None:
        """`min_interval_s`: the least time between two edits of the message (1 s in production);
        `run_id`, `requester`, `title` (the request): who the run is for (the Stop button, a
        platform's session); `secrets` (the platform's) and `tool_secrets(tool name)` (a
        connector's): known secret values, masked in step summaries; `clock` and `sleep`: the
        time edits are paced by (a test turns them by hand)."""
        self._clock = clock
        self._sleep = sleep
        self._surface = surface
        self._thread = thread
        self._interval = min_interval_s
        self._run = (run_id, requester, _cut(" ".join(title.split()), TITLE_CHARS))
        self._secrets = tuple(secrets)
        self._tool_secrets = tool_secrets
        self._steps: dict[str, _Step] = {}
        self._headline = "Working on it"
        self._state: StatusState = RunStatus.RUNNING
        self._totals = ""
        self._usage = TokenUsage()
        self._iterations = 0  # the latest iteration a step was seen in (a stop reports no count)
        self._started = clock()
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
            self._last_edit = self._clock()
        else:
            self._ref = existing
            self._dirty.set()
        self._task = asyncio.create_task(self._flush_loop(), name="status-flusher")
        return self._ref

    def restore(self, steps: Iterable[Mapping[str, Any]]) -> None:
        """A run continued from its checkpoint (after a restart, or in another process): the
        steps it had done are shown again, as they were (`StepRecord`s as stored)."""
        for step in steps:
            key = str(step.get("tool_call_id") or "")
            name, iteration = str(step.get("tool_name") or ""), int(step.get("iteration") or 0)
            self._apply(IterationStart(iteration, name, dict(step.get("tool_args") or {}), key))
            self._apply(
                IterationDone(
                    iteration, name, str(step.get("observation") or ""),
                    error=step.get("error"), blocked=bool(step.get("blocked")),
                    iter_elapsed=float(step.get("elapsed") or 0.0), tool_call_id=key,
                )
            )  # fmt: skip
        self._dirty.set()

    def on_event(self, event: RunEvent) -> None:
        """Fold one event into the latest state (cheap, synchronous; the flusher sends it)."""
        if self._final or not self._apply(event):
            return
        self._dirty.set()

    def _apply(self, event: RunEvent) -> bool:
        now = self._clock()
        if isinstance(event, ThinkingStart):
            return self._set_headline("Thinking")
        if isinstance(event, Phase) and event.phase == "selecting_tools":
            return self._set_headline("Choosing tools")
        if isinstance(event, IterationStart):
            self._iterations = max(self._iterations, event.iteration)
            key = event.tool_call_id or f"{event.iteration}:{event.tool_name}"
            secrets = self._known(event.tool_name)
            arguments = self._summary(_arguments_text(redact(event.tool_args, secrets)), secrets)
            self._steps[key] = _Step(event.tool_name, "running", now, key=key, arguments=arguments)
            self._headline = f"Running {event.tool_name}"
            return True
        if isinstance(event, IterationDone):
            step = self._step(event.tool_call_id or f"{event.iteration}:{event.tool_name}", event)
            step.state = "blocked" if event.blocked else "failed" if event.error else "done"
            step.elapsed = event.iter_elapsed or (now - step.started)
            step.output = self._summary(event.observation, self._known(event.tool_name))
            self._headline = "Working on it"
            return True
        if isinstance(event, ToolProgress):
            step = self._steps.get(event.tool_call_id)
            if step is None or step.state != "running":
                return False  # late news of a call that ended (or one never shown)
            step.progress = self._summary(progress_text(event), self._known(event.tool_name))
            return True
        if isinstance(event, ApprovalWaiting):
            step = self._steps.get(event.tool_call_id)
            if step is None:
                step = self._steps[event.tool_call_id] = _Step(
                    event.tool_name, "running", now, key=event.tool_call_id
                )
            step.state, step.detail = "waiting_approval", "waiting for approval"
            step.approval = "waiting"
            self._state, self._headline = RunStatus.WAITING_APPROVAL, "Waiting for approval"
            return True
        if isinstance(event, ApprovalEnded):
            step = self._steps.get(event.tool_call_id)
            if step is not None:
                step.detail = _approval_detail(event)
                step.approval = event.status
                step.state = "running" if event.status == ApprovalStatus.APPROVED else "blocked"
            if not any(s.state == "waiting_approval" for s in self._steps.values()):
                self._state, self._headline = RunStatus.RUNNING, "Working on it"
            return True
        if isinstance(event, CredentialWaiting):
            waiting = f"waiting for {event.person} to connect {event.connector}"
            step = self._steps.get(event.tool_call_id)
            if step is not None:
                step.detail = f"{step.detail}; {waiting}" if step.detail else waiting
            self._headline = waiting[0].upper() + waiting[1:]
            return True
        if isinstance(event, CredentialEnded):
            step = self._steps.get(event.tool_call_id)
            if step is not None:
                kept = step.detail.split("; waiting for ")[0]
                kept = "" if kept.startswith("waiting for ") else kept
                ended = "" if event.linked else f"{event.connector} not connected"
                step.detail = "; ".join(part for part in (kept, ended) if part)
            self._headline = "Working on it"
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
            step = self._steps[key] = _Step(event.tool_name, "running", self._clock())
        return step

    def _known(self, tool_name: str) -> list[str]:
        """The secrets a step of this tool could show: the platform's and the connector's."""
        try:
            return [*self._secrets, *self._tool_secrets(tool_name)]
        except Exception:  # noqa: BLE001 - no list: the key-name heuristic still applies
            log.warning("secret values of %s unavailable for the status", tool_name)
            return list(self._secrets)

    @staticmethod
    def _summary(text: str, secrets: Sequence[str]) -> str:
        """A step's arguments or output as shown: one line, known secrets masked, cut."""
        return _cut(" ".join(redact_text(text, secrets).split()), SUMMARY_CHARS)

    def queue(self, ahead: int) -> None:
        """The run waits for a seat (`bot.runs.admission`): its first view says so."""
        self._headline = queued_headline(ahead)
        self._dirty.set()

    def admit(self) -> None:
        """The run has its seat: it works now."""
        if self._set_headline("Working on it"):
            self._dirty.set()

    def _set_headline(self, text: str) -> bool:
        changed = self._headline != text
        self._headline = text
        return changed

    def view(self) -> StatusView:
        now = self._clock()
        steps = tuple(
            StatusStep(
                label=s.label,
                state=s.state,
                elapsed_s=round(s.elapsed if s.elapsed is not None else now - s.started, 1),
                detail=s.progress if s.state == "running" and s.progress else s.detail,
                key=s.key,
                arguments=s.arguments,
                output=s.output,
                approval=s.approval,
            )
            for s in self._steps.values()
        )
        run_id, requester, title = self._run
        return StatusView(
            state=self._state, steps=steps, headline=self._headline, totals=self._totals,
            run_id=run_id, requester=requester, title=title,
        )  # fmt: skip

    async def finish(
        self,
        state: StatusState,
        *,
        headline: str,
        iterations: int = 0,
        usage: TokenUsage | None = None,
    ) -> None:
        """Show the final state with a totals line, then stop the flusher once it is sent."""
        if usage is not None:
            self._usage = usage
        failed = state in (RunStatus.FAILED, RunStatus.CANCELLED)
        for step in self._steps.values():
            if step.state in ("running", "waiting_approval"):
                step.state = "failed" if failed else "done"
                step.elapsed = self._clock() - step.started
        self._state, self._headline = state, headline
        self._totals = totals_line(
            tools=len(self._steps),
            iterations=max(iterations, self._iterations),
            tokens=self._usage.total_tokens,
            elapsed_s=self._clock() - self._started,
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
            pause = self._last_edit + interval - self._clock()
            if pause > 0:
                await self._sleep(pause)  # the rate limit, not synchronisation
            self._dirty.clear()
            if self._ref is not None:
                try:
                    began = self._clock()
                    await self._surface.update_status(self._ref, self.view())
                    stretch = self._clock() - began
                    self.edits += 1
                    failures = 0
                except Exception:  # noqa: BLE001 - retried below; the run goes on regardless
                    log.exception("status edit failed for %s", self._ref.message_id)
                    failures += 1
                    if failures < MAX_EDIT_ATTEMPTS:
                        self._dirty.set()  # try the latest state again after the interval
            self._last_edit = self._clock()
            if self._final and not self._dirty.is_set():
                return


def totals_line(*, tools: int, iterations: int, tokens: int, elapsed_s: float) -> str:
    """What was done; a count nobody knows (a stopped run's tokens: the model's answer that
    would report them never came) is left out rather than shown as 0."""
    calls = "1 tool call" if tools == 1 else f"{tools} tool calls"
    parts = [calls]
    if iterations:
        parts.append("1 iteration" if iterations == 1 else f"{iterations} iterations")
    if tokens:
        parts.append(f"{tokens:,} tokens")
    return " · ".join([*parts, f"{elapsed_s:.1f}s"])


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def _arguments_text(args: Any) -> str:
    """`{"service": "api", "n": 2}` -> `service=api, n=2` (a plan task's details)."""
    if not isinstance(args, dict):
        return _json(args)
    return ", ".join(f"{k}={v if isinstance(v, str) else _json(v)}" for k, v in args.items())


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def progress_text(event: ToolProgress) -> str:
    """How far a running call got, as its step shows it: `3 of 7 (43%): copying rows`, or
    `12 done` when the tool does not know the total."""
    if event.total is not None and event.total > 0:
        share = min(max(event.progress / event.total, 0.0), 1.0)
        done = f"{event.progress:g} of {event.total:g} ({share:.0%})"
    else:
        done = f"{event.progress:g} done"
    return f"{done}: {event.message}" if event.message else done


def _approval_detail(event: ApprovalEnded) -> str:
    who = ", ".join(event.decided_by)
    if event.status in (ApprovalStatus.APPROVED, ApprovalStatus.REJECTED):
        return f"{event.status} by {who}" if who else event.status
    return event.status
