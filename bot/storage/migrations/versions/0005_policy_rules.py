"""approval policy rules: which manifest rule decided each call's policy

- `approval.policy_rule`, `approval.policy_reason`: the rule that set the approval's policy and
  its reason (shown on the card); `approval.on_timeout`: expire or reject when nobody decides.
- `call_log.policy_rule`: the rule that decided the call's policy ('' = the action's static
  policy), for the audit report's "approvals by rule".

Revision ID: 0005_policy_rules
Revises: 0004_approval_integrity
Create Date: 2026-12-10
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0005_policy_rules"
down_revision: str | None = "0004_approval_integrity"
branch_labels: str | None = None
depends_on: str | None = None


def _text(name: str, default: str = "") -> sa.Column:
    return sa.Column(
        name, sqlmodel.sql.sqltypes.AutoString(), nullable=False, server_default=default
    )


def upgrade() -> None:
    with op.batch_alter_table("approval", schema=None) as batch_op:
        batch_op.add_column(_text("policy_rule"))
        batch_op.add_column(
            sa.Column("policy_reason", sa.Text(), nullable=False, server_default="")
        )
        batch_op.add_column(_text("on_timeout", "expire"))
    with op.batch_alter_table("call_log", schema=None) as batch_op:
        batch_op.add_column(_text("policy_rule"))


def downgrade() -> None:
    with op.batch_alter_table("call_log", schema=None) as batch_op:
        batch_op.drop_column("policy_rule")
    with op.batch_alter_table("approval", schema=None) as batch_op:
        batch_op.drop_column("on_timeout")
        batch_op.drop_column("policy_reason")
        batch_op.drop_column("policy_rule")
