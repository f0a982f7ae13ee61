"""Run events: what happens to a run, as its listeners (the status reporter, the web console)
see it: the engine's step events (`bot.engine.events`) and the runtime's own.

Runtime events say what happens to a run outside the engine (an approval waits, then ends; a
call is refused for rate). They travel the same `emit` path as the engine's step events, so the
status reporter and the web console see one stream. Same conventions: frozen dataclasses,
`type` holds the wire name.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal

from bot.chat.threads import ThreadRef
from bot.engine.events import StepEvent
from bot.statuses import ApprovalStatus


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
    status: ApprovalStatus
    decided_by: tuple[str, ...] = ()
    type: Literal["approval_ended"] = "approval_ended"


@dataclass(frozen=True)
class RateLimited:
    """A tool call was refused for rate (`limit` calls per minute, `scope` in words)."""

    tool_name: str
    limit: int
    scope: str
    type: Literal["rate_limited"] = "rate_limited"


@dataclass(frozen=True)
class ApprovalLimited:
    """A call needing approval was not asked for: `person` has `limit` approvals pending."""

    tool_name: str
    person: str
    limit: int
    type: Literal["approval_limited"] = "approval_limited"


@dataclass(frozen=True)
class CredentialWaiting:
    """A tool call waits for `person` to connect their `connector` account: `link` (their
    one-time connect link) goes to them alone, never to the thread or the listeners."""

    tool_call_id: str
    tool_name: str
    person: str
    connector: str
    link: str = field(repr=False)
    type: Literal["credential_waiting"] = "credential_waiting"


@dataclass(frozen=True)
class CredentialEnded:
    """The wait for a person to connect ended: `linked`, or not (the call does not run)."""

    tool_call_id: str
    tool_name: str
    connector: str
    linked: bool
    type: Literal["credential_ended"] = "credential_ended"


RuntimeEvent = (
    ApprovalWaiting
    | ApprovalEnded
    | RateLimited
    | ApprovalLimited
    | CredentialWaiting
    | CredentialEnded
)
RunEvent = StepEvent | RuntimeEvent


# one listener of every run's events: (run id, its thread, event), e.g. the web console's live
# stream; the thread comes with each event so a listener never looks a run up
Listener = Callable[[str, ThreadRef, RunEvent], Awaitable[None] | None]
