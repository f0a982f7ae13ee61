"""the calls of one model response that need approval share one card (a batch)

- `approval.batch_id`: the batch (run id and step) the approval belongs to; '' for a call
  asked alone. Each call keeps its own row; the batch only groups their card.

Revision ID: 0022_approval_batches
Revises: 0021_console_thread_hidden
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0022_approval_batches"
down_revision: str | None = "0021_console_thread_hidden"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("approval", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column(
                "batch_id", sqlmodel.sql.sqltypes.AutoString(), nullable=False, server_default=""
            )
        )
        batch_op.create_index("ix_approval_batch_id", ["batch_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("approval", schema=None) as batch_op:
        batch_op.drop_index("ix_approval_batch_id")
        batch_op.drop_column("batch_id")
