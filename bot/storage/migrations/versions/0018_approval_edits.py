"""approvers edit a call before approving it

- `approval.model_arguments`, `approval.model_fingerprint`: the call the model made, once an
  approver edited it (`arguments` and `fingerprint` are then the edited call's); `edited_by`.
- `approvaldecision.fingerprint`: the call an approval was given for (a quorum counts only the
  approvals of the call as it stands). Existing answers are filled in from their approval.
- `call_log.model_arguments`, `call_log.edited_by`: the model's arguments beside the ones that
  ran, and who edited them.

Revision ID: 0018_approval_edits
Revises: 0017_approval_reminders
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0018_approval_edits"
down_revision: str | None = "0017_approval_reminders"
branch_labels: str | None = None
depends_on: str | None = None


def _text_column(name: str) -> sa.Column:
    return sa.Column(name, sqlmodel.sql.sqltypes.AutoString(), nullable=False, server_default="")


def upgrade() -> None:
    with op.batch_alter_table("approval", schema=None) as batch_op:
        batch_op.add_column(sa.Column("model_arguments", sa.JSON(), nullable=True))
        batch_op.add_column(_text_column("model_fingerprint"))
        batch_op.add_column(_text_column("edited_by"))
    with op.batch_alter_table("approvaldecision", schema=None) as batch_op:
        batch_op.add_column(_text_column("fingerprint"))
    op.execute(
        "UPDATE approvaldecision SET fingerprint = (SELECT approval.fingerprint FROM approval "
        "WHERE approval.id = approvaldecision.approval_id)"
    )
    with op.batch_alter_table("call_log", schema=None) as batch_op:
        batch_op.add_column(sa.Column("model_arguments", sa.JSON(), nullable=True))
        batch_op.add_column(_text_column("edited_by"))


def downgrade() -> None:
    with op.batch_alter_table("call_log", schema=None) as batch_op:
        batch_op.drop_column("edited_by")
        batch_op.drop_column("model_arguments")
    with op.batch_alter_table("approvaldecision", schema=None) as batch_op:
        batch_op.drop_column("fingerprint")
    with op.batch_alter_table("approval", schema=None) as batch_op:
        batch_op.drop_column("edited_by")
        batch_op.drop_column("model_fingerprint")
        batch_op.drop_column("model_arguments")
