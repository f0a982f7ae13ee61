"""Audit report: runs by outcome (done, failed, cancelled, still going) and why runs failed, from
the `run` table.

A run whose model fails (a refused key, an unreachable endpoint) makes no call, so the call log
never sees it: these figures do. Runs count when they started inside the window, as feedback
does, and filters narrow them the way they narrow calls: `--platform`/a channel/a workspace
by the run's conversation, `--user` to runs that person requested, `--connector`/`--action`/an
outcome to runs that made such a call (a run that failed before calling anything is then not
counted). A report shown outside direct messages counts a direct message's failed runs but
leaves their error text out. Two aggregates, read through the `(started_at, status)` index.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import false, func, select
from sqlalchemy.sql import ColumnElement

from bot.chat.audit_report import AuditQuery, RunErrorStats, RunStats
from bot.clock import as_utc
from bot.redaction import redact_text
from bot.statuses import RunStatus
from bot.storage.models import CALL_STARTED, CallLog, Conversation, Run

# run.status -> the RunStats field it counts in
_FIELDS = {
    RunStatus.DONE: "done",
    RunStatus.FAILED: "failed",
    RunStatus.CANCELLED: "cancelled",
    RunStatus.WAITING_APPROVAL: "waiting_approval",
    RunStatus.RUNNING: "running",
    RunStatus.ANSWERING: "running",
}


def run_filters(query: AuditQuery) -> list[ColumnElement[bool]]:
    """WHERE clauses on `run` for the query (see the module docstring)."""
    where: list[ColumnElement[bool]] = [Run.started_at >= query.since, Run.started_at < query.until]
    if query.user:
        where.append(Run.requester == query.user)
    if query.platform or query.channel or query.workspace is not None:
        place = select(Conversation.id)
        if query.platform:
            place = place.where(Conversation.platform == query.platform)
        if query.channel:
            place = place.where(Conversation.channel == query.channel)
        if query.workspace is not None:  # one workspace's report never shows another's runs
            place = place.where(Conversation.workspace == query.workspace)
        where.append(Run.conversation_id.in_(place))  # type: ignore[attr-defined]
    if query.connector or query.action or query.outcome:
        # a run's calls come after it started: the window's start bounds the calls read
        called = select(CallLog.run_id).where(CallLog.at >= query.since)
        if query.connector:
            called = called.where(CallLog.connector == query.connector)
        if query.action:
            called = called.where(CallLog.action == query.action)
        if query.outcome:
            status = CALL_STARTED if query.outcome == "unknown" else query.outcome
            called = called.where(CallLog.result_status == status)
        where.append(Run.id.in_(called))  # type: ignore[attr-defined]
    return where


def _shown(query: AuditQuery) -> list[ColumnElement[bool]]:
    """A failure's text may quote what was asked: a report shown outside direct messages
    leaves theirs out (the runs still count)."""
    if not query.hide_direct:
        return []
    direct = select(Conversation.id).where(Conversation.direct == false())
    return [Run.conversation_id.in_(direct)]  # type: ignore[attr-defined]


def run_stats(conn: Any, query: AuditQuery) -> RunStats:
    """Runs of the window by status, and the `query.top_errors` most frequent failure texts."""
    where = run_filters(query)
    stats = RunStats()
    for status, n in conn.execute(
        select(Run.status, func.count()).where(*where).group_by(Run.status)
    ):
        stats.started += n
        field = _FIELDS.get(status)
        if field is not None:
            setattr(stats, field, getattr(stats, field) + n)
    if stats.failed:
        stats.errors = _top_errors(conn, query, where)
    return stats


def _top_errors(
    conn: Any, query: AuditQuery, where: list[ColumnElement[bool]]
) -> list[RunErrorStats]:
    n = func.count().label("n")
    error = func.coalesce(Run.error, "")
    rows = conn.execute(
        select(error.label("error"), n, func.max(func.coalesce(Run.finished_at, Run.started_at)))
        .where(*where, Run.status == RunStatus.FAILED, *_shown(query))
        .group_by(error)
        .order_by(n.desc(), error)
        .limit(query.top_errors)
    )
    return [
        RunErrorStats(error=redact_text(text) or "(no reason recorded)", count=count,
                      last_at=as_utc(last))
        for text, count, last in rows
    ]  # fmt: skip
