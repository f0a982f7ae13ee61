"""console threads: the web console's conversations, kept server-side

- `console_item`: everything a console thread shows (the user's messages, status messages,
  approval cards, answers, notices) in its latest state; `seq` is the event id the page's
  event stream resumes from (`Last-Event-ID`), `position` its place in the thread.
- `console_thread`: one row per conversation for the sidebar (title, state, pending approvals).
- `console_sequence`: the one counter `seq` comes from (one row, starting at 0).

Revision ID: 0008_console_threads
Revises: 0006_approval_routing
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0008_console_threads"
down_revision: str | None = "0006_approval_routing"
branch_labels: str | None = None
depends_on: str | None = None


def _string(name: str) -> sa.Column:
    return sa.Column(name, sqlmodel.sql.sqltypes.AutoString(), nullable=False)


def _time(name: str) -> sa.Column:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=False)


def upgrade() -> None:
    op.create_table(
        "console_item",
        _string("id"),
        _string("root"),
        _string("kind"),
        _string("state"),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        _time("created_at"),
        _time("updated_at"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("console_item", schema=None) as batch_op:
        batch_op.create_index("ix_console_item_kind_state", ["kind", "state"], unique=False)
        batch_op.create_index("ix_console_item_root_position", ["root", "position"], unique=False)
        batch_op.create_index(batch_op.f("ix_console_item_seq"), ["seq"], unique=True)
    op.create_table(
        "console_thread",
        _string("root"),
        sa.Column("title", sa.Text(), nullable=False),
        _string("state"),
        sa.Column("pending", sa.Integer(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        _time("created_at"),
        _time("updated_at"),
        sa.PrimaryKeyConstraint("root"),
    )
    with op.batch_alter_table("console_thread", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_console_thread_seq"), ["seq"], unique=False)
    op.create_table(
        "console_sequence",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("value", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.execute("INSERT INTO console_sequence (id, value) VALUES (1, 0)")


def downgrade() -> None:
    op.drop_table("console_sequence")
    with op.batch_alter_table("console_thread", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_console_thread_seq"))
    op.drop_table("console_thread")
    with op.batch_alter_table("console_item", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_console_item_seq"))
        batch_op.drop_index("ix_console_item_root_position")
        batch_op.drop_index("ix_console_item_kind_state")
    op.drop_table("console_item")
