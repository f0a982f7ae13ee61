"""The call log's WHERE clauses for an audit query (window, connector, action, user, place,
outcome) and the report's outcome columns: shared by the aggregate report and the call lists.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import or_, select
from sqlalchemy.sql import ColumnElement

from bot.audit.approval_stats import lists
from bot.chat.audit_report import AuditQuery
from bot.storage.models import CALL_LOST, CALL_STARTED, ApprovalDecision, CallLog

# each report column and the `result_status` values it counts: a call refused because its
# process had lost the run (`lost`) was blocked (by the lease's fence), never run
STATUS_FIELDS = (
    ("ok", ("ok",)),
    ("errors", ("error",)),
    ("blocked", ("blocked", CALL_LOST)),
    ("rejected", ("rejected",)),
    ("expired", ("expired",)),
    ("unknown", (CALL_STARTED,)),
)
# `--outcome` (model.OUTCOMES) -> the statuses it selects: the same as the report's columns
OUTCOME_STATUSES = {
    "error" if name == "errors" else name: statuses for name, statuses in STATUS_FIELDS
}


def call_filters(query: AuditQuery, *, at: Any = None) -> list[ColumnElement[bool]]:
    """WHERE clauses on call_log for the query (window, connector, action, user, place,
    outcome); `at` replaces the time column in the window test (see `report._scan_at`)."""
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
    if query.workspace is not None:
        where.append(CallLog.workspace == query.workspace)
    if query.outcome:
        statuses = OUTCOME_STATUSES.get(query.outcome, (query.outcome,))
        where.append(CallLog.result_status.in_(statuses))  # type: ignore[attr-defined]
    return where
