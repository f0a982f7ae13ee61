"""run feedback and stops: thumbs up/down per person, who stopped a run, the answer's message

- `run_feedback`: one row per (run, person), changed in place when they change their mind.
- `run.answer_message_id`: the message carrying the answer's feedback buttons (a click is tied
  to the message it was made on, never to a run id the button carried).
- `run.stopped_by`: who pressed Stop; set before the click is acknowledged, so a restart in
  between never resumes the run.

Revision ID: 0009_run_feedback
Revises: 0008_console_threads
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0009_run_feedback"
down_revision: str | None = "0008_console_threads"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("run", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("answer_message_id", sqlmodel.sql.sqltypes.AutoString(), nullable=True)
        )
        batch_op.add_column(
            sa.Column("stopped_by", sqlmodel.sql.sqltypes.AutoString(), nullable=True)
        )
    op.create_table(
        "run_feedback",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("platform", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("user_id", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("rating", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["run.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("run_id", "user_id"),
    )
    with op.batch_alter_table("run_feedback", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_run_feedback_run_id"), ["run_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("run_feedback", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_run_feedback_run_id"))
    op.drop_table("run_feedback")
    with op.batch_alter_table("run", schema=None) as batch_op:
        batch_op.drop_column("stopped_by")
        batch_op.drop_column("answer_message_id")
