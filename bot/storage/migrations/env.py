"""Alembic environment: the target schema is `SQLModel.metadata` (`bot/storage/models/`).

`bot.storage.migrate` passes a connection in `config.attributes["connection"]`, so migrations run
on the caller's engine (and its PostgreSQL `search_path`); the `alembic` command line works too,
with the URL from `sqlalchemy.url` or `DATABASE_URL` through `Settings`.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine
from sqlmodel import SQLModel

import bot.storage.models  # noqa: F401 - registers the tables on SQLModel.metadata
from bot.storage.migrate import include_object

target_metadata = SQLModel.metadata


def _configure_and_run(connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
        include_object=include_object,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = context.config.attributes.get("connection")
    if connection is not None:
        _configure_and_run(connection)
        return
    url = context.config.get_main_option("sqlalchemy.url")
    from bot.config import Settings

    settings = Settings()
    if not url:
        url = settings.database_url
    key = settings.chatops_credentials_key  # the `alembic` command line: from the environment
    if key is not None and context.config.attributes.get("credentials_key") is None:
        context.config.attributes["credentials_key"] = key.get_secret_value()
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            _configure_and_run(conn)
    finally:
        engine.dispose()


def run_migrations_offline() -> None:
    context.configure(
        url=context.config.get_main_option("sqlalchemy.url"),
        target_metadata=target_metadata,
        literal_binds=True,
    )
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
