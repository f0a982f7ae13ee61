"""the audit sinks' outbox

- `audit_outbox`: each call-log and approval event waiting to go to one sink, written in the
  transaction of the row it reports, deleted once the sink took it.
- `audit_sink_lease`: which process sends for a sink, until when (one at a time: order, once).

Revision ID: 0020_audit_outbox
Revises: 0019_trigger_alert
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0020_audit_outbox"
down_revision: str | None = "0019_trigger_alert"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "audit_outbox",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("sink", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("event_uid", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("kind", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("snapshot", sa.JSON(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_audit_outbox_sink_id", "audit_outbox", ["sink", "id"])
    op.create_table(
        "audit_sink_lease",
        sa.Column("sink", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("holder", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("until", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("sink"),
    )


def downgrade() -> None:
    op.drop_table("audit_sink_lease")
    op.drop_index("ix_audit_outbox_sink_id", table_name="audit_outbox")
    op.drop_table("audit_outbox")
