"""a run's trace context

- `run.trace_parent`: the W3C `traceparent` of the run's first "run" span (when tracing is on),
  so a run resumed after a restart or adopted by another process continues the same trace.

Revision ID: 0015_run_trace_parent
Revises: 0014_audit_table_in_alembic
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0015_run_trace_parent"
down_revision: str | None = "0014_audit_table_in_alembic"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("run") as batch:
        batch.add_column(
            sa.Column("trace_parent", sqlmodel.sql.sqltypes.AutoString(), nullable=True)
        )


def downgrade() -> None:
    with op.batch_alter_table("run") as batch:
        batch.drop_column("trace_parent")
