"""a console conversation can be deleted from the console (hidden), its records kept

- `console_thread.hidden`: the console no longer lists or opens it; its items, its runs and
  their call-log rows stay as they are (deleting in the console is not erasing the audit trail).

Revision ID: 0021_console_thread_hidden
Revises: 0020_audit_outbox
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0021_console_thread_hidden"
down_revision: str | None = "0020_audit_outbox"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("console_thread") as batch:
        batch.add_column(
            sa.Column("hidden", sa.Boolean(), nullable=False, server_default=sa.false())
        )


def downgrade() -> None:
    with op.batch_alter_table("console_thread") as batch:
        batch.drop_column("hidden")
