"""The call log: one append-only row per tool call attempt, and the replay that makes resumes safe.

`CallLogHook` (PostToolUse) writes every attempt: executed, failed, blocked, rejected, expired.
Arguments and the observation are redacted with the tool's own secrets before they are stored.
`CallReplayHook` (PreToolUse, first in line) makes the log the idempotency record: a resumed run
(`RunContext.extra["resumed"]`) that reaches a tool call already logged for (run, tool call id)
gets the recorded observation instead of running the tool again. Replayed attempts are not
logged a second time.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import Engine

from bot import store_queries as queries
from bot.db import Database, as_database
from bot.engine.tools import ToolResult
from bot.redaction import redact, redact_text
from bot.store import CallLog
from hooks.registry import HookResult, PostToolUseContext, PreToolUseContext

RESUMED_KEY = "resumed"  # `RunContext.extra` flag: the run continues from a checkpoint

# approval_status values that, on a blocked call, name the result status too
_APPROVAL_ENDINGS = {"rejected": "rejected", "expired": "expired"}


class CallLogHook:
    """PostToolUse: append one `call_log` row per attempt (register it after result rewriters)."""

    name = "call_log"

    def __init__(self, *, db: Database | Engine) -> None:
        """`db`: the app's database (or its engine)."""
        self._db = as_database(db)

    async def __call__(self, ctx: PostToolUseContext) -> HookResult:
        if ctx.outcome == "replayed":
            return HookResult.allow()
        await self._db.run(queries.append_call, call_row(ctx))
        return HookResult.allow()


def call_row(ctx: PostToolUseContext) -> CallLog:
    """The call-log row for one attempt, secrets redacted."""
    secrets = list(ctx.tool.secret_values())
    notes: Mapping[str, Any] = ctx.notes
    approval_status = str(notes.get("approval_status") or "not_required")
    observation = redact_text(ctx.result.content, secrets)
    return CallLog(
        conversation_id=_int_or_none(ctx.run.conversation_id),
        run_id=ctx.run.run_id,
        tool_call_id=ctx.tool_call_id,
        platform=ctx.run.platform,
        channel=ctx.run.channel,
        direct=ctx.run.direct,
        requester=ctx.run.requester or (ctx.requesters[0] if ctx.requesters else ""),
        requesters=list(ctx.requesters),
        connector=ctx.tool.connector,
        action=ctx.tool.action or ctx.tool.name,
        tool_name=ctx.tool.name,
        mutating=ctx.tool.policy.mutating,
        arguments=redact(dict(ctx.args), secrets),
        fingerprint=ctx.fingerprint,
        approval_id=notes.get("approval_id"),
        approval_status=approval_status,
        grant_id=notes.get("grant_id"),
        approvers=[str(a) for a in notes.get("approvers", ())],
        result_status=result_status(ctx, approval_status),
        observation=observation,
        duration_ms=round(ctx.duration_s * 1000, 3),
        error=_error_text(ctx, observation),
    )


def result_status(ctx: PostToolUseContext, approval_status: str) -> str:
    """ok | error | blocked | rejected | expired."""
    if ctx.outcome == "blocked":
        return _APPROVAL_ENDINGS.get(approval_status, "blocked")
    if ctx.outcome == "error" or ctx.result.is_error:
        return "error"
    return "ok"


def _error_text(ctx: PostToolUseContext, observation: str) -> str | None:
    if ctx.outcome == "blocked":
        by = f" by {ctx.blocked_by}" if ctx.blocked_by else ""
        return f"blocked{by}: {observation}"
    if ctx.outcome == "error" or ctx.result.is_error:
        return observation
    return None


def _int_or_none(value: str) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


class CallReplayHook:
    """PreToolUse, first: a call already in the log for this run is replayed, never re-run."""

    name = "call_replay"

    def __init__(self, *, db: Database | Engine) -> None:
        """`db`: the app's database (or its engine)."""
        self._db = as_database(db)

    async def __call__(self, ctx: PreToolUseContext) -> HookResult:
        # only a resumed run can meet a call it already made; fresh runs skip the query
        if not ctx.run.extra.get(RESUMED_KEY) or not ctx.run.run_id or not ctx.tool_call_id:
            return HookResult.allow()
        row = await self._db.run(queries.recorded_call, ctx.run.run_id, ctx.tool_call_id)
        if row is None:
            return HookResult.allow()
        result = ToolResult(content=row.observation, is_error=row.result_status != "ok")
        return HookResult.replay(
            result,
            notes={"replayed_call_log_id": row.id, "approval_status": row.approval_status},
        )
