"""approval integrity: requesters, scoped and expiring grants, direct conversations

- `approval.requesters`, `call_log.requesters`: everyone whose messages the run had read (the
  single `requester` column stays: the person who started the run).
- `approval.grant_fingerprint`, `grant_ttl_s`, `grant_vary`: what "approve for this thread" would
  cover; `call_log.grant_id`: the grant a call ran under.
- `approval_grant` replaces `threadgrant`. The old grants covered a tool for a whole thread, for
  anyone, forever: they are dropped, not converted (nobody could say what they should cover).
- `conversation.direct`, `call_log.direct`: direct messages (audit reports shown in a channel
  never show their arguments).

Revision ID: 0004_approval_integrity
Revises: 0003_processed_event_age
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0004_approval_integrity"
down_revision: str | None = "0003_processed_event_age"
branch_labels: str | None = None
depends_on: str | None = None

_EMPTY_LIST = sa.text("'[]'")


def upgrade() -> None:
    with op.batch_alter_table("conversation", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("direct", sa.Boolean(), nullable=False, server_default=sa.false())
        )
    with op.batch_alter_table("approval", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("requesters", sa.JSON(), nullable=False, server_default=_EMPTY_LIST)
        )
        batch_op.add_column(
            sa.Column(
                "grant_fingerprint",
                sqlmodel.sql.sqltypes.AutoString(),
                nullable=False,
                server_default="",
            )
        )
        batch_op.add_column(
            sa.Column("grant_ttl_s", sa.Float(), nullable=False, server_default=sa.text("0"))
        )
        batch_op.add_column(
            sa.Column("grant_vary", sa.JSON(), nullable=False, server_default=_EMPTY_LIST)
        )
    with op.batch_alter_table("call_log", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("direct", sa.Boolean(), nullable=False, server_default=sa.false())
        )
        batch_op.add_column(
            sa.Column("requesters", sa.JSON(), nullable=False, server_default=_EMPTY_LIST)
        )
        batch_op.add_column(
            sa.Column("grant_id", sqlmodel.sql.sqltypes.AutoString(), nullable=True)
        )

    op.create_table(
        "approval_grant",
        sa.Column("id", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("conversation_id", sa.Integer(), nullable=False),
        sa.Column("tool_name", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("fingerprint", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("grantees", sa.JSON(), nullable=False),
        sa.Column("granted_by", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("approval_id", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["approval_id"], ["approval.id"]),
        sa.ForeignKeyConstraint(["conversation_id"], ["conversation.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("approval_grant", schema=None) as batch_op:
        batch_op.create_index(
            "ix_approval_grant_conversation_tool", ["conversation_id", "tool_name"], unique=False
        )

    with op.batch_alter_table("threadgrant", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_threadgrant_conversation_id"))
    op.drop_table("threadgrant")


def downgrade() -> None:
    op.create_table(
        "threadgrant",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("conversation_id", sa.Integer(), nullable=False),
        sa.Column("tool_name", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("granted_by", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("approval_id", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["conversation_id"], ["conversation.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("conversation_id", "tool_name"),
    )
    with op.batch_alter_table("threadgrant", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_threadgrant_conversation_id"), ["conversation_id"], unique=False
        )
    with op.batch_alter_table("approval_grant", schema=None) as batch_op:
        batch_op.drop_index("ix_approval_grant_conversation_tool")
    op.drop_table("approval_grant")
    with op.batch_alter_table("call_log", schema=None) as batch_op:
        batch_op.drop_column("grant_id")
        batch_op.drop_column("requesters")
        batch_op.drop_column("direct")
    with op.batch_alter_table("approval", schema=None) as batch_op:
        batch_op.drop_column("grant_vary")
        batch_op.drop_column("grant_ttl_s")
        batch_op.drop_column("grant_fingerprint")
        batch_op.drop_column("requesters")
    with op.batch_alter_table("conversation", schema=None) as batch_op:
        batch_op.drop_column("direct")
