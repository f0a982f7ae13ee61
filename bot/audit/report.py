"""Audit reports from the call log: who ran what, who approved it, and what failed.

`build_report(engine, AuditQuery)` fills the report model (`bot/audit/model.py`, re-exported
here). Every figure is a SQL aggregate (GROUP BY, COUNT, CASE; ordered OFFSET queries for the
percentiles and the median), so a report over a million rows never loads
them into Python: only the listed mutating calls (capped by `AuditQuery.max_calls`) come back
as rows, and `iter_calls` streams the CSV export in batches. The same queries run on SQLite
and PostgreSQL. Renderers live in `bot/audit/render.py`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any

from sqlalchemy import DateTime, Engine, false, func, or_, select, true
from sqlalchemy.sql import ColumnElement
from sqlalchemy.sql.expression import UnaryExpression
from sqlalchemy.sql.operators import custom_op

from bot.audit.approvals import approval_stats, approver_stats, count_if, lists, rule_stats
from bot.audit.feedback import feedback_for, feedback_stats
from bot.audit.model import (
    DEFAULT_MAX_CALLS,
    DEFAULT_WINDOW,
    ActionStats,
    ApprovalStats,
    ApproverStats,
    AuditQuery,
    AuditReport,
    CallEntry,
    ErrorStats,
    FeedbackStats,
    RequesterStats,
    Totals,
    parse_duration,
    parse_when,
)
from bot.clock import as_utc, utcnow
from bot.redaction import redact, redact_text
from bot.storage.models import CALL_STARTED, ApprovalDecision, CallLog

__all__ = [
    "DEFAULT_MAX_CALLS",
    "DEFAULT_WINDOW",
    "ActionStats",
    "ApprovalStats",
    "ApproverStats",
    "AuditQuery",
    "AuditReport",
    "CallEntry",
    "ErrorStats",
    "FeedbackStats",
    "RequesterStats",
    "Totals",
    "build_report",
    "iter_calls",
    "recent_calls",
    "parse_duration",
    "parse_when",
]

_EXECUTED = ("ok", "error")
WIDE_WINDOW_FRACTION = 0.2
GROUPS_INDEX = "ix_audit_call_log_groups"  # created by bot.audit.store.ensure_audit_schema


def _call_filters(query: AuditQuery, *, at: Any = None) -> list[ColumnElement[bool]]:
    """WHERE clauses on call_log for the query (window, connector, action, user)."""
    at = CallLog.at if at is None else at
    where: list[ColumnElement[bool]] = [at >= query.since, at < query.until]
    if query.connector:
        where.append(CallLog.connector == query.connector)
    if query.action:
        where.append(CallLog.action == query.action)
    if query.user:
        decided = select(ApprovalDecision.approval_id).where(ApprovalDecision.user_id == query.user)
        asked = or_(CallLog.requester == query.user, lists(CallLog.requesters, query.user))
        where.append(or_(asked, CallLog.approval_id.in_(decided)))
    if query.platform:
        where.append(CallLog.platform == query.platform)
    if query.channel:
        where.append(CallLog.channel == query.channel)
    if query.outcome:
        status = CALL_STARTED if query.outcome == "unknown" else query.outcome
        where.append(CallLog.result_status == status)
    return where


def build_report(engine: Engine, query: AuditQuery, *, now: datetime | None = None) -> AuditReport:
    """Run the aggregate queries for `query` and assemble the report (synchronous: call it
    through `asyncio.to_thread` from the event loop)."""
    with engine.connect() as conn:
        if conn.dialect.name == "postgresql":  # one snapshot: figures agree with each other
            conn.execution_options(isolation_level="REPEATABLE READ")
        ordered = (
            conn.dialect.name == "sqlite"
            and _has_sqlite_index(conn, GROUPS_INDEX)
            and _wide_window(conn, query)
        )
        grouped = _grouped_counts(query, ordered_scan=ordered)
        totals, actions, requesters = _fold(conn.execute(grouped))
        _fill_percentiles(conn, query, actions)
        errors = [
            ErrorStats(
                connector=row.connector,
                action=row.action,
                error=redact_text(row.error or ""),
                count=row.n,
                last_at=as_utc(row.last_at),
            )
            for row in conn.execute(_top_errors(query, ordered_scan=ordered))
        ]
        calls = _mutating_calls(conn, query)
        approvals = approval_stats(conn, query)
        approvers = approver_stats(conn, query)
        rules = rule_stats(conn, _call_filters(query))
        feedback = feedback_stats(conn, query)
    approvals.self_approvals = sum(a.self_approvals for a in approvers)
    return AuditReport(
        query=query,
        generated_at=now or utcnow(),
        totals=totals,
        actions=actions,
        requesters=requesters,
        approvals=approvals,
        approvers=approvers,
        rules=rules,
        mutating_calls=calls,
        mutating_calls_total=totals.mutating,
        errors=errors,
        feedback=feedback,
    )


_STATUS_FIELDS = (
    ("ok", "ok"),
    ("errors", "error"),
    ("blocked", "blocked"),
    ("rejected", "rejected"),
    ("expired", "expired"),
    ("unknown", CALL_STARTED),
)


def _has_sqlite_index(conn: Any, name: str) -> bool:
    found = conn.exec_driver_sql(
        "SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = ?", (name,)
    ).first()
    return found is not None


def _wide_window(conn: Any, query: AuditQuery) -> bool:
    """True when the window spans at least a fifth of the log's time range (two index lookups).

    SQLite aggregates by sorting: a window read through the `at` index must sort every row it
    reads by (connector, action, requester). For a wide window, scanning the covering index
    that is already in that order (and checking `at` on each entry) is several times faster.
    """
    # two statements: SQLite answers a lone min() or max() from the index end, not both at once
    first = conn.execute(select(func.min(CallLog.at))).scalar_one_or_none()
    last = conn.execute(select(func.max(CallLog.at))).scalar_one_or_none()
    if first is None or last is None:
        return False
    span = (as_utc(last) - as_utc(first)).total_seconds()
    covered = (min(query.until, as_utc(last)) - max(query.since, as_utc(first))).total_seconds()
    return span <= 0 or covered >= span * WIDE_WINDOW_FRACTION


def _scan_at() -> Any:
    """`+at`: the window test SQLite cannot answer from the `at` index (see `_grouped_counts`)."""
    return UnaryExpression(
        CallLog.__table__.c.at, operator=custom_op("+"), type_=DateTime(timezone=True)
    )


def _grouped_counts(query: AuditQuery, *, ordered_scan: bool = False) -> Any:
    """One scan: counts per (connector, action, requester); totals fold from these groups.

    `ordered_scan` (SQLite, wide windows) writes the window test as `+at`, SQLite's documented
    way to keep the planner off the `at` index, so it reads the group-ordered covering index
    `ix_audit_call_log_groups` instead and aggregates without sorting.
    """
    at = _scan_at() if ordered_scan else None
    status_counts = [
        count_if(CallLog.result_status == status).label(name) for name, status in _STATUS_FIELDS
    ]
    return (
        select(
            CallLog.connector,
            CallLog.action,
            CallLog.requester,
            func.count().label("calls"),
            *status_counts,
            count_if(CallLog.mutating == true()).label("mutating"),
        )
        .where(*_call_filters(query, at=at))
        .group_by(CallLog.connector, CallLog.action, CallLog.requester)
    )


def _fold(
    groups: Iterable[Any],
) -> tuple[Totals, list[ActionStats], list[RequesterStats]]:
    """Sum the (connector, action, requester) groups into totals, per action, per requester."""
    totals = Totals()
    actions: dict[tuple[str, str], ActionStats] = {}
    requesters: dict[str, RequesterStats] = {}
    for row in groups:
        key = (row.connector, row.action)
        action = actions.setdefault(key, ActionStats(connector=key[0], action=key[1]))
        person = requesters.setdefault(row.requester, RequesterStats(requester=row.requester))
        for target in (totals, action, person):
            target.calls += int(row.calls)
            for name, _status in _STATUS_FIELDS:
                setattr(target, name, getattr(target, name) + int(getattr(row, name)))
        totals.mutating += int(row.mutating)
        person.mutating += int(row.mutating)
    totals.requesters = len(requesters)
    return (
        totals,
        sorted(actions.values(), key=lambda a: (-a.calls, a.connector, a.action)),
        sorted(requesters.values(), key=lambda r: (-r.calls, r.requester)),
    )


def _nearest_rank(n: int, percent: int) -> int:
    """0-based offset of the nearest-rank percentile: ceil(percent/100 * n) - 1."""
    return max((n * percent + 99) // 100 - 1, 0)


def _duration_at(conn: Any, query: AuditQuery, connector: str, action: str, offset: int) -> Any:
    """The `offset`-th smallest duration of executed calls of one action in the window: an
    ordered OFFSET query the (connector, action, duration_ms, at, result_status) index answers
    without touching the table."""
    return conn.execute(
        select(CallLog.duration_ms)
        .where(
            *_call_filters(query),
            CallLog.connector == connector,
            CallLog.action == action,
            CallLog.result_status.in_(_EXECUTED),
        )
        .order_by(CallLog.duration_ms)
        .offset(offset)
        .limit(1)
    ).scalar_one_or_none()


def _fill_percentiles(conn: Any, query: AuditQuery, actions: list[ActionStats]) -> None:
    """p50/p95 per action over its executed calls (ok + errors, counted by the GROUP BY)."""
    for stats in actions:
        executed = stats.ok + stats.errors
        if not executed:
            continue
        for percent, name in ((50, "p50_ms"), (95, "p95_ms")):
            value = _duration_at(
                conn, query, stats.connector, stats.action, _nearest_rank(executed, percent)
            )
            setattr(stats, name, None if value is None else float(value))


def _top_errors(query: AuditQuery, *, ordered_scan: bool = False) -> Any:
    """The most frequent (connector, action, error); `ordered_scan` as in `_grouped_counts`
    (the group index carries `error`, so only error rows are sorted)."""
    n = func.count().label("n")
    at = _scan_at() if ordered_scan else None
    return (
        select(
            CallLog.connector,
            CallLog.action,
            CallLog.error,
            n,
            func.max(CallLog.at).label("last_at"),
        )
        .where(*_call_filters(query, at=at), CallLog.result_status == "error", *_shown(query))
        .group_by(CallLog.connector, CallLog.action, CallLog.error)
        .order_by(n.desc(), CallLog.connector, CallLog.action, CallLog.error)
        .limit(query.top_errors)
    )


def _shown(query: AuditQuery) -> list[ColumnElement[bool]]:
    """Error texts may quote arguments: a report shown outside direct messages leaves theirs out."""
    return [CallLog.direct == false()] if query.hide_direct else []


def mutating_calls_select(query: AuditQuery, *, mutating_only: bool = True) -> Any:
    """The call rows of the window in time order (mutating ones by default); CSV streams it."""
    table = CallLog.__table__
    stmt = (
        select(table)
        .where(*_call_filters(query), CallLog.mutating == true() if mutating_only else true())
        .order_by(CallLog.at, CallLog.id)
    )
    return stmt


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
        return entry.model_copy(update={"arguments": {"(direct message)": "hidden"}, "error": None})
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
        connector=row.connector,
        action=row.action,
        arguments=redact(dict(row.arguments or {})),
        approval_status=row.approval_status,
        policy_rule=row.policy_rule,
        approved_by=approved,
        rejected_by=rejected,
        result_status=row.result_status,
        duration_ms=float(row.duration_ms),
        error=redact_text(row.error) if row.error else None,
        feedback_up=up,
        feedback_down=down,
    )


def _mutating_calls(conn: Any, query: AuditQuery) -> list[CallEntry]:
    stmt = mutating_calls_select(query)
    if query.max_calls is not None:
        stmt = stmt.limit(query.max_calls)
    rows = conn.execute(stmt).all()
    decisions = decisions_for(conn, sorted({r.approval_id for r in rows if r.approval_id}))
    feedback = feedback_for(conn, (r.run_id for r in rows))
    return [
        call_entry(row, decisions, hide_direct=query.hide_direct, feedback=feedback)
        for row in rows
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
                yield call_entry(
                    row, decisions, hide_direct=query.hide_direct, feedback=feedback
                )


def recent_calls(
    engine: Engine, query: AuditQuery, *, limit: int, before_id: int | None = None
) -> list[CallEntry]:
    """The newest `limit` calls of the window (every call, not only mutating ones), newest
    first (by row id: rows are written as calls start); `before_id` pages on to older ones
    (the console's call log view)."""
    stmt = select(CallLog.__table__).where(*_call_filters(query))
    if before_id is not None:
        stmt = stmt.where(CallLog.id < before_id)
    stmt = stmt.order_by(CallLog.id.desc()).limit(limit)  # type: ignore[union-attr]
    with engine.connect() as conn:
        rows = conn.execute(stmt).all()
        decisions = decisions_for(conn, sorted({r.approval_id for r in rows if r.approval_id}))
        feedback = feedback_for(conn, (r.run_id for r in rows))
    return [
        call_entry(row, decisions, hide_direct=query.hide_direct, feedback=feedback)
        for row in rows
    ]
