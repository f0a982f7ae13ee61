"""initial schema: the tables of bot/storage/models.py

Revision ID: 0001_initial
Revises:
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0001_initial"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "call_log",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("conversation_id", sa.Integer(), nullable=True),
        sa.Column("run_id", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("tool_call_id", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("platform", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("channel", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("requester", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("connector", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("action", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("tool_name", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("mutating", sa.Boolean(), nullable=False),
        sa.Column("arguments", sa.JSON(), nullable=False),
        sa.Column("fingerprint", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("approval_id", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("approval_status", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("approvers", sa.JSON(), nullable=False),
        sa.Column("result_status", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("observation", sa.Text(), nullable=False),
        sa.Column("duration_ms", sa.Float(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("call_log", schema=None) as batch_op:
        batch_op.create_index("ix_call_log_at", ["at"], unique=False)
        batch_op.create_index("ix_call_log_connector_action", ["connector", "action"], unique=False)
        batch_op.create_index("ix_call_log_run_call", ["run_id", "tool_call_id"], unique=False)

    op.create_table(
        "conversation",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("platform", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("workspace", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("channel", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("root", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("platform", "workspace", "channel", "root"),
    )
    op.create_table(
        "processed_event",
        sa.Column("event_id", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("platform", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("event_id"),
    )
    op.create_table(
        "message",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("conversation_id", sa.Integer(), nullable=False),
        sa.Column("role", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("author", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("platform_id", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("pinned", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["conversation_id"],
            ["conversation.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("message", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_message_conversation_id"), ["conversation_id"], unique=False
        )

    op.create_table(
        "run",
        sa.Column("id", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("conversation_id", sa.Integer(), nullable=False),
        sa.Column("status", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("requester", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("query", sa.Text(), nullable=False),
        sa.Column("checkpoint", sa.JSON(), nullable=True),
        sa.Column("status_message_id", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("answer", sa.Text(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("iterations", sa.Integer(), nullable=False),
        sa.Column("prompt_tokens", sa.Integer(), nullable=False),
        sa.Column("completion_tokens", sa.Integer(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["conversation_id"],
            ["conversation.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("run", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_run_conversation_id"), ["conversation_id"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_run_status"), ["status"], unique=False)

    op.create_table(
        "threadgrant",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("conversation_id", sa.Integer(), nullable=False),
        sa.Column("tool_name", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("granted_by", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("approval_id", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["conversation_id"],
            ["conversation.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("conversation_id", "tool_name"),
    )
    with op.batch_alter_table("threadgrant", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_threadgrant_conversation_id"), ["conversation_id"], unique=False
        )

    op.create_table(
        "approval",
        sa.Column("id", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("run_id", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("conversation_id", sa.Integer(), nullable=False),
        sa.Column("tool_call_id", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("tool_name", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("connector", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("action", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("arguments", sa.JSON(), nullable=False),
        sa.Column("fingerprint", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("risk", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("requester", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("approvers", sa.JSON(), nullable=False),
        sa.Column("min_approvals", sa.Integer(), nullable=False),
        sa.Column("allow_self_approval", sa.Boolean(), nullable=False),
        sa.Column("status", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("decided_by", sa.JSON(), nullable=False),
        sa.Column("decision_reason", sa.Text(), nullable=False),
        sa.Column("thread_grant", sa.Boolean(), nullable=False),
        sa.Column("card_platform", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("card_workspace", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("card_channel", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("card_root", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("card_message_id", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("escalated", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("decided_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["conversation_id"],
            ["conversation.id"],
        ),
        sa.ForeignKeyConstraint(
            ["run_id"],
            ["run.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("run_id", "tool_call_id"),
    )
    with op.batch_alter_table("approval", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_approval_conversation_id"), ["conversation_id"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_approval_run_id"), ["run_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_approval_status"), ["status"], unique=False)

    op.create_table(
        "approvaldecision",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("approval_id", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("user_id", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("decision", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("decided_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["approval_id"],
            ["approval.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("approval_id", "user_id"),
    )
    with op.batch_alter_table("approvaldecision", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_approvaldecision_approval_id"), ["approval_id"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("approvaldecision", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_approvaldecision_approval_id"))

    op.drop_table("approvaldecision")
    with op.batch_alter_table("approval", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_approval_status"))
        batch_op.drop_index(batch_op.f("ix_approval_run_id"))
        batch_op.drop_index(batch_op.f("ix_approval_conversation_id"))

    op.drop_table("approval")
    with op.batch_alter_table("threadgrant", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_threadgrant_conversation_id"))

    op.drop_table("threadgrant")
    with op.batch_alter_table("run", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_run_status"))
        batch_op.drop_index(batch_op.f("ix_run_conversation_id"))

    op.drop_table("run")
    with op.batch_alter_table("message", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_message_conversation_id"))

    op.drop_table("message")
    op.drop_table("processed_event")
    op.drop_table("conversation")
    with op.batch_alter_table("call_log", schema=None) as batch_op:
        batch_op.drop_index("ix_call_log_run_call")
        batch_op.drop_index("ix_call_log_connector_action")
        batch_op.drop_index("ix_call_log_at")

    op.drop_table("call_log")
