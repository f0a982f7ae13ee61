"""Slack OAuth installs on the bot's own database: slack_sdk's SQLAlchemy stores, made async.

slack_sdk's async SQLAlchemy stores need an async engine (aiosqlite, asyncpg); the bot has one
synchronous engine on SQLite or PostgreSQL (psycopg) and a `Database` whose worker threads keep
queries off the event loop (and, on SQLite, queue every writer). So these adapters hold
slack_sdk's synchronous stores on that engine and run each call through the `Database`: one
schema (migration 0023 builds the tables with slack_sdk's own table builders), one queue.
The Slack surface gets them from the wiring (`bot.server`), never the database itself.

Tokens are sealed at rest (`bot.storage.sealing`, the key of people's connector credentials):
the installation store seals the bot, user and refresh tokens and the incoming-webhook URL of
what it is given before slack_sdk's store writes it, and opens what that store finds, so no
row holds a usable token (migration 0026 sealed the rows written before).
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable
from typing import Any, TypeVar

from slack_sdk.oauth.installation_store import Bot, Installation
from slack_sdk.oauth.installation_store.async_installation_store import AsyncInstallationStore
from slack_sdk.oauth.installation_store.sqlalchemy import SQLAlchemyInstallationStore
from slack_sdk.oauth.state_store.async_state_store import AsyncOAuthStateStore
from slack_sdk.oauth.state_store.sqlalchemy import SQLAlchemyOAuthStateStore
from sqlalchemy import or_, select
from sqlmodel import Session

from bot.errors import StartupError
from bot.storage.database import Database
from bot.storage.sealing import KEY_SETTING, Sealer, Unsealable

log = logging.getLogger(__name__)
T = TypeVar("T")
STATE_TTL_S = 600  # an install started must finish within ten minutes (Slack's code: ten too)
# what is sealed at rest: every token (and the incoming webhook's URL, which posts by itself)
INSTALLATION_SECRETS = (
    "bot_token", "bot_refresh_token", "user_token", "user_refresh_token", "incoming_webhook_url",
)  # fmt: skip
BOT_SECRETS = ("bot_token", "bot_refresh_token")
E = TypeVar("E", Installation, Bot)


async def _in_db(database: Database, call: Callable[[], T]) -> T:
    """`call()` (a store method opening its own connection) on the database's workers."""

    def job(_session: Session) -> T:
        return call()

    return await database.run(job)


class DatabaseInstallationStore(AsyncInstallationStore):
    """slack_sdk's `SQLAlchemyInstallationStore` on the bot's engine, awaited through the
    `Database` (the tables: `slack_installations`, `slack_bots`)."""

    def __init__(self, database: Database, client_id: str, sealer: Sealer) -> None:
        self._db = database
        self._sealer = sealer
        self._store = SQLAlchemyInstallationStore(
            client_id=client_id, engine=database.engine, logger=log
        )

    def _sealed(self, entity: E, names: tuple[str, ...]) -> E:
        """A copy of `entity` with its secrets sealed (the caller's stays usable)."""
        sealed = copy.copy(entity)
        for name in names:
            value = getattr(entity, name, None)
            if value:
                setattr(sealed, name, self._sealer.seal(value))
        return sealed

    def _opened(self, entity: E | None, names: tuple[str, ...]) -> E | None:
        """`entity` as found, its secrets opened (`Unsealable` when the key does not open them)."""
        if entity is None:
            return None
        for name in names:
            value = getattr(entity, name, None)
            if value:
                setattr(entity, name, self._sealer.open(value))
        return entity

    async def check_key(self) -> None:
        """At start-up: the key opens the stored tokens (one row is enough: they were all
        sealed with one key). StartupError naming the setting when it does not."""
        table = self._store.bots
        query = (
            select(table.c.bot_token, table.c.bot_refresh_token)
            .where(or_(table.c.bot_token.is_not(None), table.c.bot_refresh_token.is_not(None)))
            .limit(1)
        )

        def first() -> tuple[str | None, ...] | None:
            with self._store.engine.connect() as conn:
                row = conn.execute(query).first()
            return None if row is None else tuple(row)

        row = await _in_db(self._db, first)
        try:
            for value in row or ():
                if value:
                    self._sealer.open(value)
        except Unsealable:
            raise StartupError(
                f"{KEY_SETTING} does not decrypt the stored Slack installations (was the key "
                "changed? set the key they were stored with, or install the app again after "
                "deleting them)"
            ) from None

    @property
    def logger(self) -> logging.Logger:
        return log

    async def async_save(self, installation: Installation) -> None:
        sealed = self._sealed(installation, INSTALLATION_SECRETS)
        await _in_db(self._db, lambda: self._store.save(sealed))

    async def async_save_bot(self, bot: Bot) -> None:
        sealed = self._sealed(bot, BOT_SECRETS)
        await _in_db(self._db, lambda: self._store.save_bot(sealed))

    async def async_find_bot(
        self,
        *,
        enterprise_id: str | None,
        team_id: str | None,
        is_enterprise_install: bool | None = False,
    ) -> Bot | None:
        found = await _in_db(
            self._db,
            lambda: self._store.find_bot(
                enterprise_id=enterprise_id,
                team_id=team_id,
                is_enterprise_install=is_enterprise_install,
            ),
        )
        return self._opened(found, BOT_SECRETS)

    async def async_find_installation(
        self,
        *,
        enterprise_id: str | None,
        team_id: str | None,
        user_id: str | None = None,
        is_enterprise_install: bool | None = False,
    ) -> Installation | None:
        found = await _in_db(
            self._db,
            lambda: self._store.find_installation(
                enterprise_id=enterprise_id,
                team_id=team_id,
                user_id=user_id,
                is_enterprise_install=is_enterprise_install,
            ),
        )
        return self._opened(found, INSTALLATION_SECRETS)

    async def async_delete_bot(self, *, enterprise_id: str | None, team_id: str | None) -> None:
        await _in_db(
            self._db, lambda: self._store.delete_bot(enterprise_id=enterprise_id, team_id=team_id)
        )

    async def async_delete_installation(
        self, *, enterprise_id: str | None, team_id: str | None, user_id: str | None = None
    ) -> None:
        await _in_db(
            self._db,
            lambda: self._store.delete_installation(
                enterprise_id=enterprise_id, team_id=team_id, user_id=user_id
            ),
        )

    async def async_delete_all(self, *, enterprise_id: str | None, team_id: str | None) -> None:
        """Every token of the workspace (or org install), bot and users, in one transaction's
        worth of calls: what an uninstall leaves is nothing."""
        await self.async_delete_bot(enterprise_id=enterprise_id, team_id=team_id)
        await self.async_delete_installation(enterprise_id=enterprise_id, team_id=team_id)


class DatabaseStateStore(AsyncOAuthStateStore):
    """slack_sdk's `SQLAlchemyOAuthStateStore` (table `slack_oauth_states`) through the
    `Database`: a state is issued by `/slack/install` and consumed once by the redirect."""

    def __init__(self, database: Database, *, expiration_seconds: int = STATE_TTL_S) -> None:
        self._db = database
        self._store = SQLAlchemyOAuthStateStore(
            expiration_seconds=expiration_seconds, engine=database.engine, logger=log
        )

    @property
    def logger(self) -> logging.Logger:
        return log

    async def async_issue(self, *args: Any, **kwargs: Any) -> str:
        return await _in_db(self._db, lambda: self._store.issue(*args, **kwargs))

    async def async_consume(self, state: str) -> bool:
        return await _in_db(self._db, lambda: self._store.consume(state))
