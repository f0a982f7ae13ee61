"""run leases: several processes on one database

- `run.owner`, `run.lease_until`: the process that advances a run and until when (renewed by
  its heartbeat; another process adopts the run once it lapses).
- `inbox_event.owner`: the process that acknowledged an event and processes it.
- `bot_process`: the live processes and their leases.
- `run_mail`: replies for a run another process owns, taken once by the owner.

Revision ID: 0010_run_leases
Revises: 0009_run_feedback
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0010_run_leases"
down_revision: str | None = "0009_run_feedback"
branch_labels: str | None = None
depends_on: str | None = None

_TEXT = sqlmodel.sql.sqltypes.AutoString


def upgrade() -> None:
    with op.batch_alter_table("run", schema=None) as batch_op:
        batch_op.add_column(sa.Column("owner", _TEXT(), nullable=True))
        batch_op.add_column(sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True))
        batch_op.create_index(batch_op.f("ix_run_owner"), ["owner"], unique=False)
    with op.batch_alter_table("inbox_event", schema=None) as batch_op:
        batch_op.add_column(sa.Column("owner", _TEXT(), nullable=True))
    op.create_table(
        "bot_process",
        sa.Column("id", _TEXT(), nullable=False),
        sa.Column("host", _TEXT(), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("lease_until", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_table(
        "run_mail",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", _TEXT(), nullable=False),
        sa.Column("message_id", sa.Integer(), nullable=False),
        sa.Column("author", _TEXT(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("taken_by", _TEXT(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("run_mail", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_run_mail_run_id"), ["run_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("run_mail", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_run_mail_run_id"))
    op.drop_table("run_mail")
    op.drop_table("bot_process")
    with op.batch_alter_table("inbox_event", schema=None) as batch_op:
        batch_op.drop_column("owner")
    with op.batch_alter_table("run", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_run_owner"))
        batch_op.drop_column("lease_until")
        batch_op.drop_column("owner")
