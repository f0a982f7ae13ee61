"""Slack OAuth installs and the workspace on each call-log row

- `slack_installations`, `slack_bots`, `slack_oauth_states`: slack_sdk's SQLAlchemy
  installation and state stores, built by slack_sdk's own table builders so the columns are
  exactly what its stores read and write (they are the library's tables: not modelled in
  `bot/storage/models/`, so autogenerate leaves them alone, see `migrate.include_object`).
- `call_log.workspace`: the workspace (Slack team, Feishu tenant) the call was made in, so an
  audit asked in one workspace never lists another's calls; existing rows get their
  conversation's workspace ('' when the call had no conversation).

Revision ID: 0023_slack_installations
Revises: 0022_approval_batches
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op
from slack_sdk.oauth.installation_store.sqlalchemy import SQLAlchemyInstallationStore
from slack_sdk.oauth.state_store.sqlalchemy import SQLAlchemyOAuthStateStore

revision: str = "0023_slack_installations"
down_revision: str | None = "0022_approval_batches"
branch_labels: str | None = None
depends_on: str | None = None

INSTALLATIONS = SQLAlchemyInstallationStore.default_installations_table_name
BOTS = SQLAlchemyInstallationStore.default_bots_table_name
STATES = SQLAlchemyOAuthStateStore.default_table_name


def _slack_tables() -> sa.MetaData:
    metadata = sa.MetaData()
    SQLAlchemyInstallationStore.build_installations_table(metadata, INSTALLATIONS)
    SQLAlchemyInstallationStore.build_bots_table(metadata, BOTS)
    SQLAlchemyOAuthStateStore.build_oauth_states_table(metadata, STATES)
    return metadata


def upgrade() -> None:
    _slack_tables().create_all(op.get_bind(), checkfirst=True)
    with op.batch_alter_table("call_log") as batch:
        batch.add_column(
            sa.Column(
                "workspace",
                sqlmodel.sql.sqltypes.AutoString(),
                nullable=False,
                server_default="",
            )
        )
    op.execute(
        "UPDATE call_log SET workspace = COALESCE((SELECT conversation.workspace FROM "
        "conversation WHERE conversation.id = call_log.conversation_id), '')"
    )


def downgrade() -> None:
    with op.batch_alter_table("call_log") as batch:
        batch.drop_column("workspace")
    _slack_tables().drop_all(op.get_bind(), checkfirst=True)
