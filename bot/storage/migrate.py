"""Schema migrations at start-up: Alembic `upgrade head` on the bot's database.

Revisions: `bot/storage/migrations/versions/`; target schema: `bot/storage/models/`. Running
this on every start is safe: an up-to-date database is left alone. A database whose tables were
made by `SQLModel.metadata.create_all` (before migrations existed) is adopted: it is stamped at the
initial revision, then upgraded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util import CommandError
from sqlalchemy import Connection, Engine, create_engine, inspect, text

from bot.errors import UserError

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
INITIAL_REVISION = "0001_initial"
CREDENTIALS_KEY_ATTRIBUTE = "credentials_key"  # CHATOPS_CREDENTIALS_KEY, for sealing revisions
ADVISORY_LOCK_KEY = 0x63686174  # "chat": serialises migrations across processes (PostgreSQL)
# the lock's second key is the schema: processes migrating one schema wait for each other, while
# other schemas of the same server (other deployments, every test's private schema) go on
_LOCK_THIS_SCHEMA = text(
    "SELECT pg_advisory_xact_lock(:key, hashtext(coalesce(current_schema(), '')))"
)


def include_object(
    obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any
) -> bool:
    """Autogenerate sees only what `bot/storage/models/` models.

    Every table of ours is in the migrations; APScheduler's job store (`apscheduler_jobs`, the
    scheduled audit report's, created by APScheduler at its start) is not ours to model, and a
    new revision must never drop it.
    """
    return not (reflected and compare_to is None)


class SchemaTooNew(UserError):
    """The database was migrated by a newer chatops (its revision is not in this version's
    migrations): `upgrade head` cannot run, and this version must not use tables it does not
    know. The operator rolls the schema back with the newer version, or runs that version."""


def alembic_config(
    connection: Connection | None = None,
    url: str | None = None,
    *,
    credentials_key: str | None = None,
) -> Config:
    """An Alembic config built in code (no alembic.ini needed at run time); `credentials_key`:
    for the revisions that seal or open stored tokens (`CREDENTIALS_KEY_ATTRIBUTE`)."""
    config = Config()
    config.attributes[CREDENTIALS_KEY_ATTRIBUTE] = credentials_key
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if url:
        config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def head_revision() -> str:
    """The newest revision in the migrations directory."""
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    if head is None:
        raise RuntimeError(f"no migrations found in {MIGRATIONS_DIR}")
    return head


def current_revision(engine: Engine) -> str | None:
    """The revision the database is at (None: never migrated)."""
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def upgrade(engine_or_url: Engine | str, *, credentials_key: str | None = None) -> str:
    """Bring the database to the newest revision; returns that revision.

    Takes the runtime's engine (preferred: same pool, same PostgreSQL search_path) or a URL;
    `credentials_key`: CHATOPS_CREDENTIALS_KEY, which a revision that seals stored tokens
    needs when there are some (it stops with a StartupError naming it otherwise).
    """
    if isinstance(engine_or_url, str):
        engine = create_engine(engine_or_url)
        try:
            return upgrade(engine, credentials_key=credentials_key)
        finally:
            engine.dispose()
    engine = engine_or_url
    with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            # several processes starting at once: one migrates, the others wait, then see head
            conn.execute(_LOCK_THIS_SCHEMA, {"key": ADVISORY_LOCK_KEY})
        tables = set(inspect(conn).get_table_names())
        config = alembic_config(conn, credentials_key=credentials_key)
        if "alembic_version" not in tables and "conversation" in tables:
            command.stamp(config, INITIAL_REVISION)
        _refuse_unknown_revision(conn, config)
        command.upgrade(config, "head")
    return head_revision()


def _refuse_unknown_revision(conn: Connection, config: Config) -> None:
    """A `SchemaTooNew` (one line) rather than Alembic's traceback when a newer version
    migrated this database (an upgrade rolled back without rolling the schema back)."""
    current = MigrationContext.configure(conn).get_current_revision()
    if current is None:
        return
    try:
        ScriptDirectory.from_config(config).get_revision(current)
    except CommandError:
        raise SchemaTooNew(
            f"the database is at schema revision {current}, which this version of chatops does "
            f"not know (its newest is {head_revision()}): a newer version migrated it; run that "
            "version, or roll the schema back with it first (docs/deploying.md, "
            '"Rolling back")'
        ) from None
