"""`DATABASE_URL` checked before a command uses it, so every mistake is one line naming the
setting: an unknown scheme or a driver that is not installed, a SQLite directory that cannot be
created or written, a server that cannot be reached (the driver's reason, the password masked),
and for commands that only read (`chatops audit`) a database that does not exist or was never
migrated: those never create one.

Every command that opens the database goes through here (serve, chat, audit), so SQLite's parent
directories are created alike by the commands that may create a database, and by none other.
"""

from __future__ import annotations

import os
from pathlib import Path

from sqlalchemy import Connection, Engine, create_engine, inspect, pool, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError

from bot.errors import ConfigError
from bot.storage import migrate
from bot.storage.database import (
    create_db_engine,
    db_error_reason,
    libpq_defaults,
    safe_database_url,
)
from bot.storage.single_process import sqlite_file

SUPPORTED = "sqlite:///path or postgresql://user:password@host/db"


def _named(url: str) -> str:
    return f"DATABASE_URL={safe_database_url(url)}"


def _masked(text_: str, url: str) -> str:
    """The driver's words without the password (drivers may echo their connection string)."""
    try:
        password = make_url(url).password
    except ArgumentError:
        return text_
    return text_.replace(str(password), "***") if password else text_


def check_url(url: str) -> None:
    """A URL SQLAlchemy can use with a driver that is installed; else `ConfigError`."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise ConfigError(f"{_named(url)} is not a database URL (use {SUPPORTED})") from None
    try:
        parsed.get_dialect().import_dbapi()  # the driver module, as create_engine would
    except ArgumentError:  # NoSuchModuleError: "Can't load plugin: sqlalchemy.dialects:foo"
        raise ConfigError(
            f"{_named(url)}: unknown database scheme {parsed.drivername!r} (use {SUPPORTED})"
        ) from None
    except ImportError as exc:
        raise ConfigError(
            f"{_named(url)}: the driver for {parsed.drivername!r} is not installed "
            f"({exc}); chatops runs on SQLite and PostgreSQL ({SUPPORTED})"
        ) from None


def prepare_sqlite(url: str) -> None:
    """Create a SQLite database's parent directories, and check it can be written there."""
    database = sqlite_file(url)
    if database is None:
        return
    try:
        database.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(
            f"{_named(url)}: cannot create the directory {database.parent}: "
            f"{_os_reason(exc, database.parent)}"
        ) from None
    target = database if database.exists() else database.parent
    if not os.access(target, os.W_OK):
        raise ConfigError(f"{_named(url)}: {target} is not writable by this user")


def _os_reason(exc: OSError, path: Path) -> str:
    """What the OS said, plainly (a file in the way is the usual case)."""
    for parent in (path, *path.parents):
        if parent.exists() and not parent.is_dir():
            return f"{parent} is a file, not a directory"
    return exc.strerror or str(exc)


def check_reachable(url: str, *, creating: bool = False) -> None:
    """One connection, given up after libpq's `connect_timeout`; else `ConfigError` with the
    driver's reason, the password masked. `creating`: PostgreSQL must also have a schema to
    create the tables in (a search_path naming none that exists has none)."""
    engine = _probe_engine(url)
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
            if creating and conn.dialect.name == "postgresql" and not _has_schema(conn):
                raise ConfigError(
                    f"{_named(url)}: no schema to create the tables in (the search_path names "
                    "no schema that exists)"
                )
    except SQLAlchemyError as exc:
        reason = _masked(db_error_reason(exc), url)
        raise ConfigError(f"cannot reach the database {_named(url)}: {reason}") from None
    finally:
        engine.dispose()


def _has_schema(conn: Connection) -> bool:
    return conn.execute(text("SELECT current_schema()")).scalar() is not None


def _probe_engine(url: str) -> Engine:
    return create_engine(url, poolclass=pool.NullPool, connect_args=libpq_defaults(url))


def prepare_database(url: str) -> None:
    """For commands that may create the database (serve, chat): a usable URL, SQLite's
    directories made and writable, the server reachable."""
    check_url(url)
    prepare_sqlite(url)
    check_reachable(url, creating=True)


def open_existing(url: str, *, needs_table: str) -> Engine:
    """For commands that only read (audit): the database must exist and hold the bot's schema
    (`needs_table`); nothing is created, not even an empty SQLite file."""
    check_url(url)
    database = sqlite_file(url)
    if database is not None and not database.is_file():
        raise ConfigError(
            f"no database at {_named(url)} ({database} does not exist): point DATABASE_URL at "
            "the bot's database, or run `chatops serve` once to create it"
        )
    if database is None and make_url(url).get_backend_name() == "sqlite":
        raise ConfigError(f"{_named(url)} is an in-memory database: it holds no call log")
    check_reachable(url)
    engine = create_db_engine(url)
    try:
        revision = migrate.current_revision(engine)
        has_table = inspect(engine).has_table(needs_table)
    except SQLAlchemyError as exc:
        engine.dispose()
        reason = _masked(db_error_reason(exc), url)
        raise ConfigError(f"cannot read the database {_named(url)}: {reason}") from None
    if revision is None or not has_table:
        engine.dispose()
        raise ConfigError(
            f"the database at {_named(url)} has no chatops schema (never migrated): run "
            "`chatops serve` once against it to create the tables"
        )
    return engine
