"""approval routing and escalation: card copies, route, escalation ladder

- `approval_card`: every copy of an approval's card (the thread's, an approvals channel's, one
  per approver's DM), so a click on any copy is recognised and a decision edits every copy,
  after a restart too. Cards posted before this revision are copied in from `approval.card_*`.
- `approval.route`: thread | channel:<id> | dm.
- `approval.escalate`, `approval.escalation_level`: the ladder (tiers counted from
  `created_at`) and how many tiers were applied.

Revision ID: 0006_approval_routing
Revises: 0005_policy_rules
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0006_approval_routing"
down_revision: str | None = "0005_policy_rules"
branch_labels: str | None = None
depends_on: str | None = None


def _text(name: str, default: str = "") -> sa.Column:
    return sa.Column(
        name, sqlmodel.sql.sqltypes.AutoString(), nullable=False, server_default=default
    )


def upgrade() -> None:
    with op.batch_alter_table("approval", schema=None) as batch_op:
        batch_op.add_column(_text("route", "thread"))
        batch_op.add_column(
            sa.Column("escalate", sa.JSON(), nullable=False, server_default=sa.text("'[]'"))
        )
        batch_op.add_column(
            sa.Column("escalation_level", sa.Integer(), nullable=False, server_default="0")
        )
    op.create_table(
        "approval_card",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("approval_id", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("platform", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("workspace", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("channel", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("root", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("message_id", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("kind", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("user_id", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("link", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["approval_id"], ["approval.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("approval_id", "platform", "channel", "message_id"),
    )
    with op.batch_alter_table("approval_card", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_approval_card_approval_id"), ["approval_id"], unique=False
        )
    op.execute(
        "INSERT INTO approval_card (approval_id, platform, workspace, channel, root, message_id,"
        " kind, user_id, link, created_at)"
        " SELECT id, card_platform, COALESCE(card_workspace, ''), COALESCE(card_channel, ''),"
        " COALESCE(card_root, ''), card_message_id, 'thread', '', '', created_at"
        " FROM approval WHERE card_message_id IS NOT NULL AND card_platform IS NOT NULL"
    )


def downgrade() -> None:
    with op.batch_alter_table("approval_card", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_approval_card_approval_id"))
    op.drop_table("approval_card")
    with op.batch_alter_table("approval", schema=None) as batch_op:
        batch_op.drop_column("escalation_level")
        batch_op.drop_column("escalate")
        batch_op.drop_column("route")
