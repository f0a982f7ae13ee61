"""processed_event: an index on created_at, so rows past the retry window are pruned cheaply

Revision ID: 0003_processed_event_age
Revises: 0002_inbox
Create Date: 2026-12-01
"""

from __future__ import annotations

from alembic import op

revision: str = "0003_processed_event_age"
down_revision: str | None = "0002_inbox"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_index("ix_processed_event_created_at", "processed_event", ["created_at"])


def downgrade() -> None:
    op.drop_index("ix_processed_event_created_at", table_name="processed_event")
