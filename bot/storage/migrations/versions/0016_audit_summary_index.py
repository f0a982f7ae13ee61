"""the audit report's counts and its approvals by rule read one covering index in one scan

`ix_audit_call_log_summary` (connector, action, requester, policy_rule, at, result_status,
approval_status, mutating, error) replaces `ix_audit_call_log_groups` (the same without
policy_rule and approval_status): the report's grouped counts now also give the approvals by
rule, which used to read every row of the window from the table (0.4 s of a 30-day report over
a million rows). Building it on an existing log takes a few seconds per million rows, once.

Revision ID: 0016_audit_summary_index
Revises: 0015_run_trace_parent
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0016_audit_summary_index"
down_revision: str | None = "0015_run_trace_parent"
branch_labels: str | None = None
depends_on: str | None = None

_SUMMARY = "ix_audit_call_log_summary"
_SUMMARY_COLUMNS = [
    "connector",
    "action",
    "requester",
    "policy_rule",
    "at",
    "result_status",
    "approval_status",
    "mutating",
    "error",
]
_GROUPS = "ix_audit_call_log_groups"
_GROUPS_COLUMNS = ["connector", "action", "requester", "at", "result_status", "mutating", "error"]


def _indexes() -> set[str]:
    return {index["name"] for index in sa.inspect(op.get_bind()).get_indexes("call_log")}


def upgrade() -> None:
    found = _indexes()
    if _SUMMARY not in found:
        op.create_index(_SUMMARY, "call_log", _SUMMARY_COLUMNS, unique=False)
    if _GROUPS in found:
        op.drop_index(_GROUPS, table_name="call_log")


def downgrade() -> None:
    found = _indexes()
    if _GROUPS not in found:
        op.create_index(_GROUPS, "call_log", _GROUPS_COLUMNS, unique=False)
    if _SUMMARY in found:
        op.drop_index(_SUMMARY, table_name="call_log")
