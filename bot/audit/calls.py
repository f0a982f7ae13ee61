"""Audit report: the call rows themselves (not their counts), as `CallEntry`s: the report's
listed mutating calls (capped), the CSV and JSON exports (every call, streamed in batches) and
the console's newest-first pages. Each row gets who approved or rejected it and the thumbs on
its run's answer, looked up per batch; arguments and errors are redacted again on the way out.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from sqlalchemy import Engine, select, true

from bot.audit.feedback import feedback_for
from bot.audit.filters import call_filters
from bot.chat.audit_report import AuditQuery, CallEntry
from bot.clock import as_utc
from bot.redaction import redact, redact_text
from bot.storage.models import ApprovalDecision, CallLog


def mutating_calls_select(query: AuditQuery, *, mutating_only: bool = True) -> Any:
    """The call rows of the window in time order (mutating ones by default); CSV streams it."""
    table = CallLog.__table__
    return (
        select(table)
        .where(*call_filters(query), CallLog.mutating == true() if mutating_only else true())
        .order_by(CallLog.at, CallLog.id)
    )


def decisions_for(conn: Any, approval_ids: list[str]) -> dict[str, tuple[list[str], list[str]]]:
    """approval id -> (approved by, rejected by), in decision order; queried in chunks."""
    found: dict[str, tuple[list[str], list[str]]] = {}
    for start in range(0, len(approval_ids), 500):
        chunk = approval_ids[start : start + 500]
        rows = conn.execute(
            select(
                ApprovalDecision.approval_id, ApprovalDecision.user_id, ApprovalDecision.decision
            )
            .where(ApprovalDecision.approval_id.in_(chunk))
            .order_by(ApprovalDecision.decided_at, ApprovalDecision.id)
        )
        for row in rows:
            approved, rejected = found.setdefault(row.approval_id, ([], []))
            (approved if row.decision == "approve" else rejected).append(row.user_id)
    return found


def call_entry(
    row: Any,
    decisions: dict[str, tuple[list[str], list[str]]],
    *,
    hide_direct: bool = False,
    feedback: dict[str, tuple[int, int]] | None = None,
) -> CallEntry:
    """A call_log row as a report entry; arguments redacted again (defence in depth). A direct
    message's call in a report shown elsewhere keeps its counts, not its arguments or error.
    `feedback`: run id -> the thumbs up and down of its answer."""
    if hide_direct and row.direct:
        entry = call_entry(row, decisions, feedback=feedback)
        hidden: dict[str, Any] = {"arguments": {"(direct message)": "hidden"}, "error": None}
        hidden["approval_comment"] = ""
        return entry.model_copy(update=hidden)
    up, down = (feedback or {}).get(row.run_id or "", (0, 0))
    approved, rejected = decisions.get(row.approval_id or "", ([], []))
    if not approved and not rejected and row.approval_status in ("approved", "thread_grant"):
        approved = list(row.approvers or [])
    return CallEntry(
        id=row.id,
        at=as_utc(row.at),
        platform=row.platform,
        channel=row.channel,
        requester=row.requester,
        workspace=row.workspace or "",
        connector=row.connector,
        action=row.action,
        arguments=redact(dict(row.arguments or {})),
        approval_status=row.approval_status,
        policy_rule=row.policy_rule,
        approved_by=approved,
        rejected_by=rejected,
        approval_comment=redact_text(row.approval_comment or ""),
        result_status=row.result_status,
        duration_ms=float(row.duration_ms),
        error=redact_text(row.error) if row.error else None,
        feedback_up=up,
        feedback_down=down,
        run_id=row.run_id or "",
    )


def listed_mutating_calls(conn: Any, query: AuditQuery) -> list[CallEntry]:
    """The first `query.max_calls` mutating calls of the window (all when None), in time order."""
    stmt = mutating_calls_select(query)
    if query.max_calls is not None:
        stmt = stmt.limit(query.max_calls)
    rows = conn.execute(stmt).all()
    decisions = decisions_for(conn, sorted({r.approval_id for r in rows if r.approval_id}))
    feedback = feedback_for(conn, (r.run_id for r in rows))
    return [
        call_entry(row, decisions, hide_direct=query.hide_direct, feedback=feedback) for row in rows
    ]


def iter_calls(
    engine: Engine, query: AuditQuery, *, mutating_only: bool = False, batch: int = 1000
) -> Iterator[CallEntry]:
    """Every call of the window in time order, streamed in batches (CSV export): memory stays
    flat however many rows the window holds; `max_calls` does not apply. With `hide_direct`,
    direct messages' calls keep their row, not their arguments or error."""
    stmt = mutating_calls_select(query, mutating_only=mutating_only)
    with engine.connect() as conn, engine.connect() as lookup:
        result = conn.execution_options(yield_per=batch).execute(stmt)
        for rows in result.partitions():
            ids = sorted({r.approval_id for r in rows if r.approval_id})
            decisions = decisions_for(lookup, ids)
            feedback = feedback_for(lookup, (r.run_id for r in rows))
            for row in rows:
                yield call_entry(row, decisions, hide_direct=query.hide_direct, feedback=feedback)


def recent_calls(
    engine: Engine, query: AuditQuery, *, limit: int, before_id: int | None = None
) -> list[CallEntry]:
    """The newest `limit` calls of the window (every call, not only mutating ones), newest
    first (by row id: rows are written as calls start); `before_id` pages on to older ones
    (the console's call log view)."""
    stmt = select(CallLog.__table__).where(*call_filters(query))
    if before_id is not None:
        stmt = stmt.where(CallLog.id < before_id)
    stmt = stmt.order_by(CallLog.id.desc()).limit(limit)  # type: ignore[union-attr]
    with engine.connect() as conn:
        rows = conn.execute(stmt).all()
        decisions = decisions_for(conn, sorted({r.approval_id for r in rows if r.approval_id}))
        feedback = feedback_for(conn, (r.run_id for r in rows))
    return [
        call_entry(row, decisions, hide_direct=query.hide_direct, feedback=feedback) for row in rows
    ]
