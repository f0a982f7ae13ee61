"""Audit report: thumbs up and down on the answers, from `run_feedback` (one row per person and
run, their latest rating).

Ratings count for runs started inside the window, as approvals count when requested; filters
narrow them the way they narrow calls: `--platform`/a channel by the run's conversation,
`--user` by the run's requester or the person who rated, `--connector`/`--action` to runs that
called it. The CSV export gives each call the thumbs of its run's answer (`feedback_for`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import func, or_, select
from sqlalchemy.sql import ColumnElement

from bot.audit.approval_stats import count_if
from bot.chat.audit_report import AuditQuery, FeedbackStats
from bot.storage.models import CallLog, Conversation, Run, RunFeedback


def _filters(query: AuditQuery) -> list[ColumnElement[bool]]:
    where: list[ColumnElement[bool]] = [Run.started_at >= query.since, Run.started_at < query.until]
    if query.user:
        where.append(or_(Run.requester == query.user, RunFeedback.user_id == query.user))
    if query.platform:
        where.append(Conversation.platform == query.platform)
    if query.channel:
        where.append(Conversation.channel == query.channel)
    if query.workspace is not None:
        where.append(Conversation.workspace == query.workspace)
    if query.connector or query.action:
        called = select(CallLog.run_id)
        if query.connector:
            called = called.where(CallLog.connector == query.connector)
        if query.action:
            called = called.where(CallLog.action == query.action)
        where.append(Run.id.in_(called))  # type: ignore[attr-defined]
    return where


def feedback_stats(conn: Any, query: AuditQuery) -> FeedbackStats:
    row = conn.execute(
        select(
            func.count(func.distinct(RunFeedback.run_id)),
            count_if(RunFeedback.rating == "up"),
            count_if(RunFeedback.rating == "down"),
        )
        .select_from(RunFeedback)
        .join(Run, RunFeedback.run_id == Run.id)  # type: ignore[arg-type]
        .join(Conversation, Run.conversation_id == Conversation.id)  # type: ignore[arg-type]
        .where(*_filters(query))
    ).one()
    return FeedbackStats(answers_rated=row[0] or 0, up=row[1] or 0, down=row[2] or 0)


def feedback_for(conn: Any, run_ids: Iterable[str]) -> dict[str, tuple[int, int]]:
    """run id -> (thumbs up, thumbs down) of its answer; queried in chunks."""
    ids = sorted({r for r in run_ids if r})
    found: dict[str, tuple[int, int]] = {}
    for start in range(0, len(ids), 500):
        rows = conn.execute(
            select(
                RunFeedback.run_id,
                count_if(RunFeedback.rating == "up"),
                count_if(RunFeedback.rating == "down"),
            )
            .where(RunFeedback.run_id.in_(ids[start : start + 500]))  # type: ignore[attr-defined]
            .group_by(RunFeedback.run_id)
        )
        for run_id, up, down in rows:
            found[run_id] = (int(up or 0), int(down or 0))
    return found
