"""Run events as the seed protocol's frames (the web console's SSE stream): the engine's by the
seed's table, the runtime's as `step` frames of their own type."""

from __future__ import annotations

from bot.chat.events import (
    ApprovalEnded,
    ApprovalLimited,
    ApprovalWaiting,
    CredentialEnded,
    CredentialWaiting,
    RateLimited,
    RunEvent,
)
from bot.engine.protocol import SeedFrame, seed_frame, step_frame


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
        case ApprovalLimited():
            return step_frame(
                "approval_limited", "done", tool_name=event.tool_name, limit=event.limit
            )
        case CredentialWaiting():  # the link is the person's alone: never in a frame
            return step_frame(
                "credentials", "waiting", tool_call_id=event.tool_call_id,
                tool_name=event.tool_name, person=event.person, connector=event.connector,
            )  # fmt: skip
        case CredentialEnded():
            return step_frame(
                "credentials", "done", tool_call_id=event.tool_call_id,
                tool_name=event.tool_name, connector=event.connector, linked=event.linked,
            )  # fmt: skip
        case _:
            return seed_frame(event)
