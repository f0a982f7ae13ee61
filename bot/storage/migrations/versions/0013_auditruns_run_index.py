"""runs by outcome in the audit report

- `ix_run_started_at_status`: the audit counts the runs started in a window by status (and
  lists why the failed ones failed) from this index, not by reading the whole `run` table.

Revision ID: 0013_auditruns_run_index
Revises: 0012_leases_fenced
Create Date: 2026-12-03
"""

from __future__ import annotations

from alembic import op

revision: str = "0013_auditruns_run_index"
down_revision: str | None = "0012_leases_fenced"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_index("ix_run_started_at_status", "run", ["started_at", "status"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_run_started_at_status", table_name="run")
