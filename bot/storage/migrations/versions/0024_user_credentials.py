"""per-user connector credentials (OAuth), their connect links, and whose credentials a call used

- `user_credential`: one person's tokens for one connector, encrypted at rest.
- `oauth_link`: a one-time connect link (its state, PKCE verifier, expiry, use).
- `call_log.credential_owner`: `platform:workspace:user`, `bot`, or '' (never a token).

Revision ID: 0024_user_credentials
Revises: 0023_slack_installations
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0024_user_credentials"
down_revision: str | None = "0023_slack_installations"
branch_labels: str | None = None
depends_on: str | None = None

_TEXT = sqlmodel.sql.sqltypes.AutoString


def upgrade() -> None:
    op.create_table(
        "user_credential",
        sa.Column("connector", _TEXT(), nullable=False),
        sa.Column("owner", _TEXT(), nullable=False),
        sa.Column("platform", _TEXT(), nullable=False),
        sa.Column("workspace", _TEXT(), nullable=False),
        sa.Column("user_id", _TEXT(), nullable=False),
        sa.Column("secret", sa.Text(), nullable=False),
        sa.Column("scopes", sa.Text(), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("linked_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("refreshed_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("connector", "owner"),
    )
    op.create_index("ix_user_credential_user_id", "user_credential", ["user_id"])
    op.create_table(
        "oauth_link",
        sa.Column("id", _TEXT(), nullable=False),
        sa.Column("connector", _TEXT(), nullable=False),
        sa.Column("owner", _TEXT(), nullable=False),
        sa.Column("platform", _TEXT(), nullable=False),
        sa.Column("workspace", _TEXT(), nullable=False),
        sa.Column("user_id", _TEXT(), nullable=False),
        sa.Column("state_hash", _TEXT(), nullable=True),
        sa.Column("verifier", sa.Text(), nullable=False),
        sa.Column("browser_hash", _TEXT(), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("used_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_oauth_link_state_hash", "oauth_link", ["state_hash"], unique=True)
    with op.batch_alter_table("call_log") as batch:
        batch.add_column(
            sa.Column("credential_owner", sa.Text(), nullable=False, server_default="")
        )


def downgrade() -> None:
    with op.batch_alter_table("call_log") as batch:
        batch.drop_column("credential_owner")
    op.drop_index("ix_oauth_link_state_hash", table_name="oauth_link")
    op.drop_table("oauth_link")
    op.drop_index("ix_user_credential_user_id", table_name="user_credential")
    op.drop_table("user_credential")
