"""Slack installations' tokens sealed at rest (Fernet, CHATOPS_CREDENTIALS_KEY)

- `slack_installations`: `bot_token`, `bot_refresh_token`, `user_token`, `user_refresh_token`
  and `incoming_webhook_url`; `slack_bots`: `bot_token`, `bot_refresh_token`. The columns
  become TEXT (a sealed token is longer than slack_sdk's VARCHAR(200)) and every stored value
  is sealed with the key (`bot.storage.sealing`), as `DatabaseInstallationStore` seals what
  it saves from now on.
- The key comes from `migrate.upgrade(credentials_key=...)` (the runtime passes
  CHATOPS_CREDENTIALS_KEY; the `alembic` command line reads it from the environment). With
  rows to seal and no key, the upgrade stops with a StartupError naming the setting, and
  changes nothing.
- Downgrade opens every value again with the key (the older version reads plain tokens) and
  gives the columns back their VARCHAR(200): it needs the same key, and on PostgreSQL fails
  rather than cut a token longer than that.

Revision ID: 0026_slack_tokens_sealed
Revises: 0025_report_run_outcome
Create Date: 2026-12-04
"""

from __future__ import annotations

from collections.abc import Callable

import sqlalchemy as sa
from alembic import context, op

from bot.errors import StartupError
from bot.storage.sealing import KEY_SETTING, Sealer

revision: str = "0026_slack_tokens_sealed"
down_revision: str | None = "0025_report_run_outcome"
branch_labels: str | None = None
depends_on: str | None = None

SEALED = {
    "slack_installations": (
        "bot_token", "bot_refresh_token", "user_token", "user_refresh_token",
        "incoming_webhook_url",
    ),
    "slack_bots": ("bot_token", "bot_refresh_token"),
}  # fmt: skip


def _sealer(why: str) -> Sealer | None:
    """The key's sealer; None when there is nothing to do; StartupError when rows need it."""
    key = context.config.attributes.get("credentials_key")
    if key:
        return Sealer(key)
    bind = op.get_bind()
    for table, columns in SEALED.items():
        filled = sa.or_(*(sa.column(c).is_not(None) for c in columns))
        if bind.execute(
            sa.select(sa.literal(1)).select_from(sa.table(table)).where(filled)
        ).first():
            raise StartupError(
                f"the database holds Slack installations whose tokens {why}: set {KEY_SETTING} "
                "(make one with `chatops credentials key`) and start again"
            )
    return None


def _rewrite(change: Callable[[str], str]) -> None:
    """Every non-empty sealed column of every row, through `change`."""
    bind = op.get_bind()
    for table, columns in SEALED.items():
        t = sa.table(table, sa.column("id"), *(sa.column(c) for c in columns))
        for row in bind.execute(sa.select(t)).mappings().all():
            values = {c: change(row[c]) for c in columns if row[c]}
            if values:
                bind.execute(sa.update(t).where(t.c.id == row["id"]).values(**values))


def _retype(
    kind: Callable[[], sa.types.TypeEngine], was: Callable[[], sa.types.TypeEngine]
) -> None:
    for table, columns in SEALED.items():
        with op.batch_alter_table(table) as batch:
            for name in columns:
                batch.alter_column(name, type_=kind(), existing_type=was(), existing_nullable=True)


def upgrade() -> None:
    sealer = _sealer("are kept in plain text and must now be encrypted")
    _retype(sa.Text, lambda: sa.String(200))
    if sealer is not None:
        _rewrite(sealer.seal)


def downgrade() -> None:
    sealer = _sealer("are encrypted and must be decrypted for the older version")
    if sealer is not None:
        _rewrite(sealer.open)
    _retype(lambda: sa.String(200), sa.Text)
