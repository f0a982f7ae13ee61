"""grants bound to their rule

- `approval_grant.policy_rule`: the manifest rule that decided the granted call's policy ('' =
  the static policy); a later call is covered only while it resolves to the same rule.
- `approval_grant.approvers`: the approvers that policy named when the grant was made.

Existing grants are filled in from the approval they were made on (its `policy_rule` is the rule
its card was opened under). A row written without them afterwards (an older process still
running) keeps NULL, and a grant that records no rule covers nothing.

Revision ID: 0011_grants_rule
Revises: 0010_run_leases
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0011_grants_rule"
down_revision: str | None = "0010_run_leases"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("approval_grant", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("policy_rule", sqlmodel.sql.sqltypes.AutoString(), nullable=True)
        )
        batch_op.add_column(sa.Column("approvers", sa.JSON(), nullable=True))
    op.execute(
        "UPDATE approval_grant SET "
        "policy_rule = (SELECT approval.policy_rule FROM approval "
        "WHERE approval.id = approval_grant.approval_id), "
        "approvers = (SELECT approval.approvers FROM approval "
        "WHERE approval.id = approval_grant.approval_id)"
    )


def downgrade() -> None:
    with op.batch_alter_table("approval_grant", schema=None) as batch_op:
        batch_op.drop_column("approvers")
        batch_op.drop_column("policy_rule")
