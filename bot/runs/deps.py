"""The typed dependencies a run of `chatops serve` gives its hooks (`RunContext[RunDeps]`).

The engine passes `RunContext.deps` through without knowing its type; the runtime's hooks (the
approval gate, the call log's replay, the rate limit) read it with `run_deps`, which is None for
a run started without them (the terminal, a bare engine in a test): each hook then does what it
does without a thread (the gate fails closed).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from bot.chat.threads import ThreadRef
from bot.engine.hooks import RunContext
from bot.storage.fencing import Fence

Emitter = Callable[[Any], Awaitable[None]]  # a run's one `emit`: step and runtime events


@dataclass(frozen=True, kw_only=True)
class RunDeps:
    """`thread`: where the run answers (approval cards go there); `emit`: the run's event
    stream (status message, console, thread notices); `resumed`: the run continues from a
    checkpoint after a restart (logged calls are replayed, never run again); `fence`: how this
    process holds the run (a tool call starts only while it still does); `lost(why)`: called
    when a check finds the run is no longer this process's (the run's task stops at once)."""

    thread: ThreadRef
    emit: Emitter
    resumed: bool = False
    fence: Fence | None = None
    lost: Callable[[str], None] | None = None


def run_deps(run: RunContext[Any]) -> RunDeps | None:
    """The run's `RunDeps`, or None when it was started without them."""
    return run.deps if isinstance(run.deps, RunDeps) else None
