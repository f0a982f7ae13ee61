"""Runtime events and the small types the run manager hands around.

Runtime events say what happens to a run outside the engine (an approval waits, then ends). They
travel the same `emit` path as the engine's step events (`bot.engine.events`), so the status
reporter and the web console see one stream. Same conventions: frozen dataclasses, `type` holds
the wire name.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from cachetools import TTLCache

from bot.engine.artifacts import Artifact
from bot.engine.events import StepEvent, emit_safely
from bot.engine.interrupts import InterruptQueue
from bot.engine.protocol import SeedFrame, seed_frame, step_frame
from bot.engine.stopping import StopSignal
from bot.engine.tools import ToolRegistry
from bot.surfaces.base import AnswerFile, Surface, ThreadRef

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ApprovalWaiting:
    """A tool call is waiting for a human decision (its card is in the thread)."""

    tool_call_id: str
    tool_name: str
    approval_id: str
    type: Literal["approval_waiting"] = "approval_waiting"


@dataclass(frozen=True)
class ApprovalEnded:
    """The decision arrived (approved, rejected, expired or cancelled)."""

    tool_call_id: str
    tool_name: str
    approval_id: str
    status: str
    decided_by: tuple[str, ...] = ()
    type: Literal["approval_ended"] = "approval_ended"


@dataclass(frozen=True)
class RateLimited:
    """A tool call was refused for rate (`limit` calls per minute, `scope` in words)."""

    tool_name: str
    limit: int
    scope: str
    type: Literal["rate_limited"] = "rate_limited"


RuntimeEvent = ApprovalWaiting | ApprovalEnded | RateLimited
RunEvent = StepEvent | RuntimeEvent


def run_event_frame(event: RunEvent) -> SeedFrame:
    """The seed protocol's frame for any run event: the engine's by the seed's table, the
    runtime's as `step` frames of their own type (`approval`, `rate_limited`)."""
    match event:
        case ApprovalWaiting():
            return step_frame(
                "approval", "waiting", tool_call_id=event.tool_call_id,
                tool_name=event.tool_name, approval_id=event.approval_id,
            )  # fmt: skip
        case ApprovalEnded():
            return step_frame(
                "approval", "done", tool_call_id=event.tool_call_id, tool_name=event.tool_name,
                approval_id=event.approval_id, outcome=event.status,
                decided_by=list(event.decided_by),
            )  # fmt: skip
        case RateLimited():
            return step_frame(
                "rate_limited", "done", tool_name=event.tool_name, limit=event.limit,
                scope=event.scope,
            )  # fmt: skip
        case _:
            return seed_frame(event)


RunEmit = Callable[[RunEvent], Awaitable[None] | None]


Listener = Callable[[str, RunEvent], Awaitable[None] | None]


class Agent(Protocol):
    """What the run manager needs of `bot.engine.agent.ReActAgent`."""

    tools: ToolRegistry  # a tool's secret values are masked in the status message

    async def run(self, query: str, **kwargs: Any) -> Any: ...

    async def synthesize(self, result: Any, *, emit: Any = None) -> str: ...


@dataclass(frozen=True)
class DispatchOutcome:
    """What `dispatch()` did with a message."""

    kind: Literal["duplicate", "interrupt", "forwarded", "started", "ignored", "busy"]
    conversation_id: int | None = None
    run_id: str | None = None


@dataclass(eq=False)
class ActiveRun:
    """The one live run of a conversation: its task and the queue its interrupts go into."""

    conversation_id: int
    thread: ThreadRef
    direct: bool = False
    run_id: str = ""
    interrupts: InterruptQueue = field(default_factory=InterruptQueue)
    queued: list[tuple[str, int | None]] = field(default_factory=list)  # (user, message id)
    not_history: set[int] = field(default_factory=set)  # message ids a follow-up run reads
    first_requesters: tuple[str, ...] = ()  # who asked a follow-up run (its query's authors)
    task: asyncio.Task[None] | None = None
    stop: StopSignal = field(default_factory=StopSignal)  # a person's Stop (`bot.runs.stopping`)
    # the run's requesters: everyone whose message it read or will read (they may stop it)
    people: set[str] = field(default_factory=set)
    # another process took the run over (this one's lease lapsed): the task ends, the run not
    lost: bool = False

    def begin(self, run_id: str, *people: str) -> None:
        """A (new) run of this conversation starts: a fresh stop signal, its requesters."""
        self.run_id, self.stop = run_id, StopSignal()
        self.people = {p for p in people if p}


class RecentEvents:
    """Ids seen in the last `ttl_s` seconds, at most `max_items` of them (a flood of new ids
    evicts the oldest): a cheap check before the database's, bounded in memory. Owned by the
    run manager and by each surface; thread-safe, as Feishu's SDK calls from worker threads.
    """

    def __init__(self, *, ttl_s: float, max_items: int = 50_000) -> None:
        self._ids: TTLCache[str, bool] = TTLCache(maxsize=max_items, ttl=ttl_s)
        self._lock = threading.Lock()

    def seen(self, event_id: str) -> bool:
        """True if `event_id` was seen within the TTL; otherwise remember it and say False."""
        if not event_id:
            return False
        with self._lock:
            if event_id in self._ids:
                return True
            self._ids[event_id] = True
            return False

    def add_if_new(self, *keys: str) -> bool:
        """Remember every (non-empty) key afresh; True only if none of them had been seen.
        Feishu may deliver one message under a new event id: both ids are remembered."""
        keys = tuple(k for k in keys if k)
        with self._lock:
            seen = any(k in self._ids for k in keys)
            for key in keys:
                self._ids[key] = True
        return not seen


def run_emitter(
    run_id: str,
    on_status: Callable[[RunEvent], None],
    listeners: list[Listener],
    surface: Surface,
    thread: ThreadRef,
) -> Callable[[RunEvent], Awaitable[None]]:
    """A run's one `emit`: the status message first, then any listeners; a call refused for
    rate is also said in the thread (once per tool and run)."""
    told: set[str] = set()

    async def emit(event: RunEvent) -> None:
        on_status(event)
        if isinstance(event, RateLimited) and event.tool_name not in told:
            told.add(event.tool_name)
            await surface.post_notice(thread, rate_limit_notice(event))
        for listener in listeners:
            await emit_safely(lambda e, fn=listener: fn(run_id, e), event)

    return emit


def rate_limit_notice(event: RateLimited) -> str:
    return (
        f"`{event.tool_name}` was refused: at most {event.limit} calls a minute {event.scope}. "
        "The agent was told to wait or work with what it has."
    )


def answer_files(artifacts: Sequence[Artifact]) -> tuple[AnswerFile, ...]:
    """The documents a run's tools produced, as the files its answer carries."""
    return tuple(AnswerFile(a.name, a.content_type, a.content) for a in artifacts)
