"""The "tool.call" span of each tool call attempt (PostToolUse, last: the outcome the call log
recorded is known). In the chain only when tracing is on.

The span is written once the attempt is over, dated back by its duration (the engine measured
it); it is a child of the run's span. It names the connector, the action and the outcome, never
the arguments nor the result.
"""

from __future__ import annotations

import time
from typing import Any

from opentelemetry.trace import Status, StatusCode, Tracer

from bot.engine.hooks import HookResult, PostToolUseContext
from bot.engine.notes import ApprovalNote
from bot.observability.tracing import (
    ACTION,
    APPROVAL_RULE,
    CONNECTOR,
    SPAN_TOOL,
    TOOL_DURATION_MS,
    TOOL_OUTCOME,
)
from hooks.call_log import result_status

APPROVAL_STATUS = "chatops.approval.status"


class ToolSpanHook:
    """PostToolUse: one "tool.call" span per attempt (replayed ones too: the run went past
    them again, without calling the tool)."""

    name = "trace_tool"

    def __init__(self, tracer: Tracer) -> None:
        self._tracer = tracer

    async def __call__(self, ctx: PostToolUseContext[Any]) -> HookResult:
        approval = ctx.notes.get(ApprovalNote) or ApprovalNote(status="not_required")
        approval_status = approval.status or "not_required"
        outcome = "replayed" if ctx.outcome == "replayed" else result_status(ctx, approval_status)
        ended = time.time_ns()
        span = self._tracer.start_span(
            SPAN_TOOL,
            start_time=ended - round(ctx.duration_s * 1e9),
            attributes={
                CONNECTOR: ctx.tool.connector,
                ACTION: ctx.tool.action or ctx.tool.name,
                TOOL_OUTCOME: outcome,
                TOOL_DURATION_MS: round(ctx.duration_s * 1000, 3),
                APPROVAL_STATUS: approval_status,
                APPROVAL_RULE: approval.policy_rule or "",
            },
            record_exception=False,
            set_status_on_exception=False,
        )
        if outcome == "error":
            span.set_status(Status(StatusCode.ERROR))
        span.end(end_time=ended)
        return HookResult.allow()
