"""fenced leases: a lease epoch on every run, and one start per tool call

- `run.lease_epoch`: the fencing token, raised by every adoption; a tool call starts, a
  checkpoint is written and a run ends only while the writer's epoch is the run's.
- `call_start`: one row per tool call that went out, keyed by (run, tool call id), so the
  database refuses a second start of the same call.

Revision ID: 0012_leases_fenced
Revises: 0011_grants_rule
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0012_leases_fenced"
down_revision: str | None = "0011_grants_rule"
branch_labels: str | None = None
depends_on: str | None = None

_TEXT = sqlmodel.sql.sqltypes.AutoString


def upgrade() -> None:
    with op.batch_alter_table("run", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("lease_epoch", sa.Integer(), nullable=False, server_default="0")
        )
    op.create_table(
        "call_start",
        sa.Column("run_id", _TEXT(), nullable=False),
        sa.Column("tool_call_id", _TEXT(), nullable=False),
        sa.Column("call_log_id", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("run_id", "tool_call_id"),
    )
    # the calls already logged as gone out (started, ok, error) keep their one start
    op.execute(
        "INSERT INTO call_start (run_id, tool_call_id, call_log_id) "
        "SELECT run_id, tool_call_id, MIN(id) FROM call_log "
        "WHERE run_id <> '' AND tool_call_id <> '' "
        "AND result_status IN ('started', 'ok', 'error') GROUP BY run_id, tool_call_id"
    )


def downgrade() -> None:
    op.drop_table("call_start")
    with op.batch_alter_table("run", schema=None) as batch_op:
        batch_op.drop_column("lease_epoch")
