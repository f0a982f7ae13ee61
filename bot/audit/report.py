"""Audit reports from the call log: who ran what, who approved it, and what failed.

`build_report(engine, AuditQuery)` fills the report model (`bot/chat/audit_report.py`, re-exported
here). Every figure is a SQL aggregate (GROUP BY, COUNT, CASE; ordered OFFSET queries for the
percentiles and the median), so a report over a million rows never loads them into Python:
only the listed mutating calls (capped by `AuditQuery.max_calls`) come back as rows, and
`iter_calls` streams the CSV export in batches. The same queries run on SQLite and PostgreSQL.
Approvals, feedback, runs by outcome and the call rows (`bot/audit/calls.py`) have their own
modules; renderers `bot/audit/render.py`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import DateTime, Engine, false, func, select, true
from sqlalchemy.sql import ColumnElement
from sqlalchemy.sql.expression import UnaryExpression
from sqlalchemy.sql.operators import custom_op

from bot.audit.approval_stats import (
    add_rule_counts,
    approval_stats,
    approver_stats,
    count_if,
    rule_counts,
    sorted_rules,
)
from bot.audit.calls import iter_calls, listed_mutating_calls, recent_calls
from bot.audit.feedback import feedback_stats
from bot.audit.filters import STATUS_FIELDS, call_filters
from bot.audit.runs import run_stats
from bot.chat.audit_report import (
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
    RuleStats,
    Totals,
    parse_duration,
    parse_when,
)
from bot.clock import as_utc, utcnow
from bot.redaction import redact_text
from bot.storage.database import Database
from bot.storage.models import CallLog

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
    "report_for",
    "parse_duration",
    "parse_when",
]

_EXECUTED = ("ok", "error")
WIDE_WINDOW_FRACTION = 0.2
GROUPS_INDEX = "ix_audit_call_log_summary"  # on CallLog, created by migration 0016


async def report_for(
    db: Database, query: AuditQuery, *, now: datetime | None = None
) -> AuditReport:
    """`build_report` from the event loop: in a thread of its own on the app's engine, not
    through the database's queue, so a long read never holds up the runs' short writes."""
    return await asyncio.to_thread(build_report, db.engine, query, now=now)


def build_report(
    engine: Engine,
    query: AuditQuery,
    *,
    now: datetime | None = None,
    on_phase: Callable[[str], None] | None = None,
) -> AuditReport:
    """Run the aggregate queries for `query` and assemble the report (synchronous: call it
    through `report_for` from the event loop). `on_phase` hears what it is reading next (the
    CLI's progress line)."""
    phase = on_phase or (lambda _name: None)
    with engine.connect() as conn:
        if conn.dialect.name == "postgresql":  # one snapshot: figures agree with each other
            conn.execution_options(isolation_level="REPEATABLE READ")
        ordered = (
            conn.dialect.name == "sqlite"
            and _has_sqlite_index(conn, GROUPS_INDEX)
            and _wide_window(conn, query)
        )
        phase("counting calls")
        grouped = _grouped_counts(query, ordered_scan=ordered)
        totals, actions, requesters, rules = _fold(conn.execute(grouped))
        phase("durations")
        _fill_percentiles(conn, query, actions)
        phase("errors")
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
        phase("listing mutating calls")
        calls = listed_mutating_calls(conn, query)
        phase("approvals")
        approvals = approval_stats(conn, query)
        approvers = approver_stats(conn, query)
        phase("runs and feedback")
        feedback = feedback_stats(conn, query)
        runs = run_stats(conn, query)
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
        runs=runs,
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
    """One scan: counts per (connector, action, requester, policy rule); totals, actions,
    requesters and approvals by rule all fold from these groups.

    `ordered_scan` (SQLite, wide windows) writes the window test as `+at`, SQLite's documented
    way to keep the planner off the `at` index, so it reads the group-ordered covering index
    `ix_audit_call_log_summary` instead and aggregates without sorting.
    """
    at = _scan_at() if ordered_scan else None
    status_counts = [
        count_if(CallLog.result_status.in_(statuses)).label(name)  # type: ignore[attr-defined]
        for name, statuses in STATUS_FIELDS
    ]
    return (
        select(
            CallLog.connector,
            CallLog.action,
            CallLog.requester,
            func.count().label("calls"),
            *status_counts,
            count_if(CallLog.mutating == true()).label("mutating"),
            CallLog.policy_rule,
            *rule_counts(),
        )
        .where(*call_filters(query, at=at))
        .group_by(CallLog.connector, CallLog.action, CallLog.requester, CallLog.policy_rule)
    )


def _fold(
    groups: Iterable[Any],
) -> tuple[Totals, list[ActionStats], list[RequesterStats], list[RuleStats]]:
    """Sum the (connector, action, requester, rule) groups into totals, per action, per
    requester and per rule."""
    totals = Totals()
    actions: dict[tuple[str, str], ActionStats] = {}
    requesters: dict[str, RequesterStats] = {}
    rules: dict[tuple[str, str, str], RuleStats] = {}
    for row in groups:
        add_rule_counts(rules, row)
        key = (row.connector, row.action)
        action = actions.setdefault(key, ActionStats(connector=key[0], action=key[1]))
        person = requesters.setdefault(row.requester, RequesterStats(requester=row.requester))
        for target in (totals, action, person):
            target.calls += int(row.calls)
            for name, _status in STATUS_FIELDS:
                setattr(target, name, getattr(target, name) + int(getattr(row, name)))
        totals.mutating += int(row.mutating)
        person.mutating += int(row.mutating)
    totals.requesters = len(requesters)
    return (
        totals,
        sorted(actions.values(), key=lambda a: (-a.calls, a.connector, a.action)),
        sorted(requesters.values(), key=lambda r: (-r.calls, r.requester)),
        sorted_rules(rules),
    )


def _nearest_rank(n: int, percent: int) -> int:
    """0-based offset of the nearest-rank percentile: ceil(percent/100 * n) - 1."""
    return max((n * percent + 99) // 100 - 1, 0)


def _duration_at(
    conn: Any, query: AuditQuery, connector: str, action: str, offset: int, n: int
) -> Any:
    """The `offset`-th smallest of the `n` durations of executed calls of one action in the
    window: an ordered OFFSET query the (connector, action, duration_ms, at, result_status)
    index answers without touching the table. Walked from the nearer end: p95 is the
    (n - 1 - offset)-th largest, a twentieth of the walk from the bottom."""
    descending = offset > (n - 1) // 2
    order = CallLog.duration_ms.desc() if descending else CallLog.duration_ms  # type: ignore[attr-defined]
    return conn.execute(
        select(CallLog.duration_ms)
        .where(
            *call_filters(query),
            CallLog.connector == connector,
            CallLog.action == action,
            CallLog.result_status.in_(_EXECUTED),
        )
        .order_by(order)
        .offset(n - 1 - offset if descending else offset)
        .limit(1)
    ).scalar_one_or_none()


def _fill_percentiles(conn: Any, query: AuditQuery, actions: list[ActionStats]) -> None:
    """p50/p95 per action over its executed calls (ok + errors, counted by the GROUP BY)."""
    for stats in actions:
        executed = stats.ok + stats.errors
        if not executed:
            continue
        for percent, name in ((50, "p50_ms"), (95, "p95_ms")):
            offset = _nearest_rank(executed, percent)
            value = _duration_at(conn, query, stats.connector, stats.action, offset, executed)
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
        .where(*call_filters(query, at=at), CallLog.result_status == "error", *_shown(query))
        .group_by(CallLog.connector, CallLog.action, CallLog.error)
        .order_by(n.desc(), CallLog.connector, CallLog.action, CallLog.error)
        .limit(query.top_errors)
    )


def _shown(query: AuditQuery) -> list[ColumnElement[bool]]:
    """Error texts may quote arguments: a report shown outside direct messages leaves theirs out."""
    return [CallLog.direct == false()] if query.hide_direct else []
