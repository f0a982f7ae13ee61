"""the alerts triggers opened threads for

- `trigger_alert`: one row per (trigger, alert key), written before a webhook's 200, so a
  redelivery in any process starts nothing; it holds the alert's thread (its resolution is told
  there).
- `run.connectors`: the only connectors a run may use (a trigger's list); NULL: every one.

Revision ID: 0019_trigger_alert
Revises: 0018_approval_edits
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0019_trigger_alert"
down_revision: str | None = "0018_approval_edits"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    text = sqlmodel.sql.sqltypes.AutoString
    op.create_table(
        "trigger_alert",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("trigger", text(), nullable=False),
        sa.Column("alert_key", text(), nullable=False),
        sa.Column("state", text(), nullable=False),
        sa.Column("platform", text(), nullable=False),
        sa.Column("workspace", text(), nullable=False),
        sa.Column("channel", text(), nullable=False),
        sa.Column("root", text(), nullable=False),
        sa.Column("claimed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("resolved_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("trigger", "alert_key", name="uq_trigger_alert_key"),
    )
    with op.batch_alter_table("run") as batch:
        batch.add_column(sa.Column("connectors", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("run") as batch:
        batch.drop_column("connectors")
    op.drop_table("trigger_alert")
