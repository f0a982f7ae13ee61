"""Runtime events: what happens to a run outside the engine (an approval waits, then ends).

They travel the same `emit` path as the engine's step events (`bot.engine.events`), so the status
reporter and the web console see one stream. Same conventions: frozen dataclasses, `type` holds
the wire name.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from bot.engine.events import StepEvent

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


RuntimeEvent = ApprovalWaiting | ApprovalEnded
RunEvent = StepEvent | RuntimeEvent
RunEmit = Callable[[RunEvent], Awaitable[None] | None]


async def emit_safely(emit: Any, event: RunEvent) -> None:
    """Call a sync or async emitter; a failing emitter is logged, never raised into the run."""
    if emit is None:
        return
    try:
        outcome = emit(event)
        if inspect.isawaitable(outcome):
            await outcome
    except Exception:  # noqa: BLE001 - an observer must not break the run it observes
        log.exception("event listener failed on %s", getattr(event, "type", event))
