"""The call log: one row per tool call attempt, written ahead; the replay that makes resumes safe.

The log is write-ahead. `CallStartHook` (PreToolUse, last in line) inserts a `started` row once
every check before it allowed the call, before the call goes out; `CallLogHook` (PostToolUse)
completes that row with the result, or appends a whole row for an attempt that never went out
(blocked, rejected, expired). A row still `started` is a call whose outcome is unknown: the
process stopped while it ran. Arguments, the observation and the error are redacted before
they are stored, with every secret the process knows (the app's `Redactor`) besides the tool's.

`CallReplayHook` (PreToolUse, first in line) makes the log the idempotency record: a resumed run
(`RunDeps.resumed`) that reaches a tool call already logged for (run, tool call id)
gets the recorded observation instead of running the tool again, and a call that was `started`
but never completed is not run again either: the model is told its outcome is unknown.
Replayed attempts are not logged a second time.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bot.approvals.schema import policy_of
from bot.engine.hooks import HookResult, PostToolUseContext, PreToolUseContext, RunContext
from bot.engine.notes import ApprovalNote, Notes
from bot.engine.tools import Tool, ToolResult
from bot.observability.metrics import Metrics
from bot.redaction import Redactor, redact, redact_text
from bot.runs.deps import run_deps
from bot.storage import queries as queries
from bot.storage.database import Database
from bot.storage.fencing import Fence, start_call
from bot.storage.models import CALL_LOST, CALL_STARTED, CallLog
from bot.storage.outbox import queue_outcome_unknown
from connectors.acting_as import CredentialNote

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StartedRow:
    """PreToolUse note: the `started` row the PostToolUse hook completes."""

    call_log_id: int


@dataclass(frozen=True)
class LeaseLost:
    """PreToolUse note: the call was not started because this process no longer holds the run;
    the attempt is not logged here (the run goes on where it is held, which logs the call once,
    and a row here would be replayed there as if the call had been refused)."""

    why: str


# approval_status values that, on a blocked call, name the result status too
_APPROVAL_ENDINGS = {"rejected": "rejected", "expired": "expired"}


class CallStartHook:
    """PreToolUse, registered last: the `started` row, committed before the call goes out.

    If the row cannot be written the registry blocks the call (fail closed): no call reaches a
    target system without its row. The row goes in with the checks that allow the call
    (`bot.storage.fencing.start_call`): the run is still this process's at its lease epoch (if
    not, the call is blocked and the run's task told it lost the run), and the call never
    started before (if it did, it is not run again: its outcome is unknown here).
    """

    name = "call_log_start"

    def __init__(
        self,
        *,
        db: Database,
        redactor: Redactor | None = None,
        fence: Callable[[], Fence | None] | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        """`db`: the app's database; `redactor`: the process's secrets;
        `fence`: how this process holds the run, for a run without `RunDeps` (the terminal's;
        a serve run carries it in its deps); `metrics`: counts the attempts refused here."""
        self._db = db
        self._redactor = redactor
        self._fence = fence
        self._metrics = metrics

    async def __call__(self, ctx: PreToolUseContext[Any]) -> HookResult:
        row = _row(
            ctx.tool, ctx.tool_call_id, ctx.args, ctx.fingerprint, ctx.run, ctx.notes,
            ctx.requesters, known_secrets(ctx.tool, self._redactor),
        )  # fmt: skip
        row.result_status = CALL_STARTED
        deps = run_deps(ctx.run)
        fence = deps.fence if deps is not None else None
        if fence is None and self._fence is not None:
            fence = self._fence()
        started = await self._db.run(start_call, row, fence)
        if started.outcome == "lost":
            why = f"not run: this process no longer holds the run ({started.why})"
            row.result_status, row.error = CALL_LOST, why  # the refused attempt is logged too,
            await asyncio.shield(self._db.run(queries.append_call, row))  # before the run is let go
            if self._metrics is not None:
                self._metrics.tool_call(row.connector, row.action, CALL_LOST)
            if deps is not None and deps.lost is not None:  # (this cancels the run's task)
                deps.lost(
                    f"tool call {ctx.tool_call_id or ctx.tool.name} not started, {started.why}"
                )
            return HookResult.block(why, note=LeaseLost(started.why))
        if started.outcome == "duplicate" or started.row is None:
            return HookResult.replay(ToolResult.error(outcome_unknown(ctx.tool.name)))
        return HookResult.allow(note=StartedRow(started.row.id or 0))


class CallLogHook:
    """PostToolUse: complete the attempt's row (register it after result rewriters)."""

    name = "call_log"

    def __init__(
        self, *, db: Database, redactor: Redactor | None = None, metrics: Metrics | None = None
    ) -> None:
        """`db`: the app's database; `redactor`: the process's secrets; `metrics`: counts each
        attempt it logs (by connector, action and outcome: never its arguments)."""
        self._db = db
        self._redactor = redactor
        self._metrics = metrics

    async def __call__(self, ctx: PostToolUseContext[Any]) -> HookResult:
        # a replayed attempt is logged already; a lost one got its row when it was refused
        if ctx.outcome == "replayed" or ctx.notes.get(LeaseLost) is not None:
            return HookResult.allow()
        row = call_row(ctx, self._redactor)
        started = ctx.notes.get(StartedRow)
        if started is not None:
            await self._db.run(queries.complete_call, started.call_log_id, row)
        else:
            await self._db.run(queries.append_call, row)
        log.info("tool %s: %s in %d ms (approval %s)", row.tool_name, row.result_status,
                 row.duration_ms or 0, row.approval_status)  # fmt: skip
        if self._metrics is not None:
            went_out = ctx.outcome != "blocked"
            self._metrics.tool_call(row.connector, row.action, row.result_status,
                                    ctx.duration_s if went_out else None)  # fmt: skip
        return HookResult.allow()


def known_secrets(tool: Tool, redactor: Redactor | None) -> list[str]:
    """The tool's own secrets and every other one the process knows."""
    return [*tool.secret_values(), *(redactor.secrets() if redactor is not None else ())]


def call_row(ctx: PostToolUseContext[Any], redactor: Redactor | None = None) -> CallLog:
    """The call-log row for one finished attempt, secrets redacted."""
    secrets = known_secrets(ctx.tool, redactor)
    row = _row(
        ctx.tool, ctx.tool_call_id, ctx.args, ctx.fingerprint, ctx.run, ctx.notes,
        ctx.requesters, secrets,
    )  # fmt: skip
    observation = redact_text(ctx.result.content, secrets)
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
    secrets: Sequence[str],
) -> CallLog:
    """What a row records before the outcome is known: who, where, which call, the approval
    (the `ApprovalNote` a gate wrote; none: not required), and everyone the call was made for."""
    approval = notes.get(ApprovalNote) or ApprovalNote(status="not_required")
    return CallLog(
        conversation_id=run.conversation_id,
        run_id=run.run_id,
        tool_call_id=tool_call_id,
        platform=run.platform,
        workspace=run.workspace,
        channel=run.channel,
        direct=run.direct,
        requester=run.requester or (requesters[0] if requesters else ""),
        requesters=list(requesters),
        connector=tool.connector,
        action=tool.action or tool.name,
        tool_name=tool.name,
        mutating=policy_of(tool).mutating,
        arguments=redact(dict(args), secrets),
        model_arguments=(
            redact(dict(approval.model_arguments), secrets)
            if approval.model_arguments is not None
            else None
        ),
        edited_by=approval.edited_by,
        fingerprint=fingerprint,
        approval_id=approval.approval_id,
        approval_status=approval.status or "not_required",
        policy_rule=approval.policy_rule,
        grant_id=approval.grant_id,
        approvers=list(approval.approvers),
        approval_comment=approval.comment,
        credential_owner=credential.owner if (credential := notes.get(CredentialNote)) else "",
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

    def __init__(self, *, db: Database) -> None:
        """`db`: the app's database."""
        self._db = db

    async def __call__(self, ctx: PreToolUseContext[Any]) -> HookResult:
        # only a resumed run can meet a call it already made; fresh runs skip the query
        deps = run_deps(ctx.run)
        if deps is None or not deps.resumed or not ctx.run.run_id or not ctx.tool_call_id:
            return HookResult.allow()
        row = await self._db.run(queries.recorded_call, ctx.run.run_id, ctx.tool_call_id)
        if row is None:
            return HookResult.allow()
        if row.result_status == CALL_STARTED:
            await self._db.run(queue_outcome_unknown, row)  # the audit sinks hear it too
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
