"""what each scheduled audit report firing did

- `scheduled_report_run.outcome`: where the firing posted and why a channel got nothing (a
  Slack workspace without an installation, a platform that refused it); '' on older rows.

Revision ID: 0025_report_run_outcome
Revises: 0024_user_credentials
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0025_report_run_outcome"
down_revision: str | None = "0024_user_credentials"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("scheduled_report_run") as batch:
        batch.add_column(sa.Column("outcome", sa.Text(), nullable=False, server_default=""))


def downgrade() -> None:
    with op.batch_alter_table("scheduled_report_run") as batch:
        batch.drop_column("outcome")
