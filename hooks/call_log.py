"""The call log: one row per tool call attempt, written ahead; the replay that makes resumes safe.

The log is write-ahead. `CallStartHook` (PreToolUse, last in line) inserts a `started` row once
every check before it allowed the call, before the call goes out; `CallLogHook` (PostToolUse)
completes that row with the result, or appends a whole row for an attempt that never went out
(blocked, rejected, expired). A row still `started` is a call whose outcome is unknown: the
process stopped while it ran. Arguments and the observation are redacted with the tool's own
secrets before they are stored.

`CallReplayHook` (PreToolUse, first in line) makes the log the idempotency record: a resumed run
(`RunDeps.resumed`) that reaches a tool call already logged for (run, tool call id)
gets the recorded observation instead of running the tool again, and a call that was `started`
but never completed is not run again either: the model is told its outcome is unknown.
Replayed attempts are not logged a second time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine

from bot.engine.hooks import HookResult, PostToolUseContext, PreToolUseContext, RunContext
from bot.engine.notes import ApprovalNote, Notes
from bot.engine.tools import Tool, ToolResult
from bot.redaction import redact, redact_text
from bot.runs.deps import run_deps
from bot.storage import queries as queries
from bot.storage.database import Database, as_database
from bot.storage.models import CALL_STARTED, CallLog


@dataclass(frozen=True)
class StartedRow:
    """PreToolUse note: the `started` row the PostToolUse hook completes."""

    call_log_id: int


# approval_status values that, on a blocked call, name the result status too
_APPROVAL_ENDINGS = {"rejected": "rejected", "expired": "expired"}


class CallStartHook:
    """PreToolUse, registered last: the `started` row, committed before the call goes out.

    If the row cannot be written the registry blocks the call (fail closed): no call reaches a
    target system without its row.
    """

    name = "call_log_start"

    def __init__(self, *, db: Database | Engine) -> None:
        """`db`: the app's database (or its engine)."""
        self._db = as_database(db)

    async def __call__(self, ctx: PreToolUseContext[Any]) -> HookResult:
        row = _row(
            ctx.tool, ctx.tool_call_id, ctx.args, ctx.fingerprint, ctx.run, ctx.notes,
            ctx.requesters,
        )  # fmt: skip
        row.result_status = CALL_STARTED
        stored = await self._db.run(queries.add_call, row)
        return HookResult.allow(note=StartedRow(stored.id))


class CallLogHook:
    """PostToolUse: complete the attempt's row (register it after result rewriters)."""

    name = "call_log"

    def __init__(self, *, db: Database | Engine) -> None:
        """`db`: the app's database (or its engine)."""
        self._db = as_database(db)

    async def __call__(self, ctx: PostToolUseContext[Any]) -> HookResult:
        if ctx.outcome == "replayed":
            return HookResult.allow()
        row = call_row(ctx)
        started = ctx.notes.get(StartedRow)
        if started is not None:
            await self._db.run(queries.complete_call, started.call_log_id, row)
        else:
            await self._db.run(queries.append_call, row)
        return HookResult.allow()


def call_row(ctx: PostToolUseContext[Any]) -> CallLog:
    """The call-log row for one finished attempt, secrets redacted."""
    row = _row(
        ctx.tool, ctx.tool_call_id, ctx.args, ctx.fingerprint, ctx.run, ctx.notes, ctx.requesters
    )
    observation = redact_text(ctx.result.content, list(ctx.tool.secret_values()))
    row.result_status = result_status(ctx, row.approval_status)
    row.observation = observation
    row.duration_ms = round(ctx.duration_s * 1000, 3)
    row.error = _error_text(ctx, observation)
    return row


def _row(
    tool: Tool,
    tool_call_id: str,
    args: Mapping[str, Any],
    fingerprint: str,
    run: RunContext[Any],
    notes: Notes,
    requesters: Sequence[str],
) -> CallLog:
    """What a row records before the outcome is known: who, where, which call, the approval
    (the `ApprovalNote` a gate wrote; none: not required), and everyone the call was made for."""
    secrets = list(tool.secret_values())
    approval = notes.get(ApprovalNote) or ApprovalNote(status="not_required")
    return CallLog(
        conversation_id=run.conversation_id,
        run_id=run.run_id,
        tool_call_id=tool_call_id,
        platform=run.platform,
        channel=run.channel,
        direct=run.direct,
        requester=run.requester or (requesters[0] if requesters else ""),
        requesters=list(requesters),
        connector=tool.connector,
        action=tool.action or tool.name,
        tool_name=tool.name,
        mutating=tool.policy.mutating,
        arguments=redact(dict(args), secrets),
        fingerprint=fingerprint,
        approval_id=approval.approval_id,
        approval_status=approval.status or "not_required",
        policy_rule=approval.policy_rule,
        grant_id=approval.grant_id,
        approvers=list(approval.approvers),
    )


def result_status(ctx: PostToolUseContext[Any], approval_status: str) -> str:
    """ok | error | blocked | rejected | expired."""
    if ctx.outcome == "blocked":
        return _APPROVAL_ENDINGS.get(approval_status, "blocked")
    if ctx.outcome == "error" or ctx.result.is_error:
        return "error"
    return "ok"


def _error_text(ctx: PostToolUseContext[Any], observation: str) -> str | None:
    if ctx.outcome == "blocked":
        by = f" by {ctx.blocked_by}" if ctx.blocked_by else ""
        return f"blocked{by}: {observation}"
    if ctx.outcome == "error" or ctx.result.is_error:
        return observation
    return None


class CallReplayHook:
    """PreToolUse, first: a call already in the log for this run is replayed, never re-run."""

    name = "call_replay"

    def __init__(self, *, db: Database | Engine) -> None:
        """`db`: the app's database (or its engine)."""
        self._db = as_database(db)

    async def __call__(self, ctx: PreToolUseContext[Any]) -> HookResult:
        # only a resumed run can meet a call it already made; fresh runs skip the query
        deps = run_deps(ctx.run)
        if deps is None or not deps.resumed or not ctx.run.run_id or not ctx.tool_call_id:
            return HookResult.allow()
        row = await self._db.run(queries.recorded_call, ctx.run.run_id, ctx.tool_call_id)
        if row is None:
            return HookResult.allow()
        if row.result_status == CALL_STARTED:
            return HookResult.replay(ToolResult.error(outcome_unknown(ctx.tool.name)))
        result = ToolResult(content=row.observation, is_error=row.result_status != "ok")
        return HookResult.replay(result)  # replayed attempts are not logged again


def outcome_unknown(tool_name: str) -> str:
    """What the model is told about a call that went out before a stop and never came back."""
    return (
        f"`{tool_name}` was started before the bot restarted and its outcome is unknown (it may "
        "or may not have taken effect), so it was not run again. Tell the user, and check the "
        "system's state before asking to run it again."
    )
