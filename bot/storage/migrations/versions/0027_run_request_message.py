"""A run names the thread message that asked for it

- `run.request_message_id`: the id of the user message that started the run (the mention, or
  the last of the replies that became a follow-up run). An adopted run that never checkpointed
  starts again with the history before it. Until now that message was found by time (the last
  user message stored by the run's start), and a host whose clock was ahead, or stepped back,
  took a later reply for the request. Rows before this revision keep NULL: they are found by
  time, as before.

Revision ID: 0027_run_request_message
Revises: 0026_slack_tokens_sealed
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0027_run_request_message"
down_revision: str | None = "0026_slack_tokens_sealed"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("run") as batch:
        batch.add_column(sa.Column("request_message_id", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("run") as batch:
        batch.drop_column("request_message_id")
