"""approval reminders and decision comments

- `approval_reminder`: the one direct-message reminder each approver gets about an approval,
  claimed (inserted) before it is sent; unique per (approval, user), so a restarted process or
  a second one on the same database never reminds anyone twice.
- `call_log.approval_comment`: what the approver wrote with their decision (approve or reject),
  kept beside the outcome.

Revision ID: 0017_approval_reminders
Revises: 0016_audit_summary_index
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0017_approval_reminders"
down_revision: str | None = "0016_audit_summary_index"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "approval_reminder",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("approval_id", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("user_id", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("claimed_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["approval_id"], ["approval.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("approval_id", "user_id"),
    )
    with op.batch_alter_table("approval_reminder", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_approval_reminder_approval_id"), ["approval_id"], unique=False
        )
    with op.batch_alter_table("call_log", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("approval_comment", sa.Text(), nullable=False, server_default="")
        )


def downgrade() -> None:
    with op.batch_alter_table("call_log", schema=None) as batch_op:
        batch_op.drop_column("approval_comment")
    with op.batch_alter_table("approval_reminder", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_approval_reminder_approval_id"))
    op.drop_table("approval_reminder")
