"""the audit's claim table and report indexes join the migrations

- `scheduled_report_run`: one row per claimed firing of a scheduled audit report (the unique
  (job, fire time) key lets one process post it).
- `ix_audit_call_log_groups`, `ix_audit_call_log_durations`, `ix_audit_approval_decision_user`:
  the audit report's covering indexes.

Until now the audit created these itself at scheduler start (`CREATE ... IF NOT EXISTS`), outside
the migrations; a database where it did keeps them as they are (same definitions): each one is
created only where it is missing.

Revision ID: 0014_audit_table_in_alembic
Revises: 0013_auditruns_run_index
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0014_audit_table_in_alembic"
down_revision: str | None = "0013_auditruns_run_index"
branch_labels: str | None = None
depends_on: str | None = None

_TEXT = sqlmodel.sql.sqltypes.AutoString
_INDEXES = (
    (
        "ix_audit_call_log_groups",
        "call_log",
        ["connector", "action", "requester", "at", "result_status", "mutating", "error"],
    ),
    (
        "ix_audit_call_log_durations",
        "call_log",
        ["connector", "action", "duration_ms", "at", "result_status"],
    ),
    ("ix_audit_approval_decision_user", "approvaldecision", ["user_id", "approval_id"]),
)


def upgrade() -> None:
    inspector = sa.inspect(op.get_bind())
    if not inspector.has_table("scheduled_report_run"):
        op.create_table(
            "scheduled_report_run",
            sa.Column("id", sa.Integer(), nullable=False),
            sa.Column("job_id", _TEXT(length=200), nullable=False),
            sa.Column("fire_time", sa.DateTime(timezone=True), nullable=False),
            sa.Column("claimed_by", _TEXT(length=200), nullable=False),
            sa.Column("claimed_at", sa.DateTime(timezone=True), nullable=False),
            sa.PrimaryKeyConstraint("id"),
            sa.UniqueConstraint("job_id", "fire_time", name="uq_scheduled_report_run_job_fire"),
        )
    for name, table, columns in _INDEXES:
        if name not in {index["name"] for index in inspector.get_indexes(table)}:
            op.create_index(name, table, columns, unique=False)


def downgrade() -> None:
    for name, table, _columns in reversed(_INDEXES):
        op.drop_index(name, table_name=table)
    op.drop_table("scheduled_report_run")
