"""Schema migrations at start-up: Alembic `upgrade head` on the bot's database.

Revisions: `bot/storage/migrations/versions/`; target schema: `bot/storage/models.py`. Running
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
from sqlalchemy import Connection, Engine, create_engine, inspect, text

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
INITIAL_REVISION = "0001_initial"
ADVISORY_LOCK_KEY = 0x63686174  # "chat": serialises migrations across processes (PostgreSQL)


def include_object(
    obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any
) -> bool:
    """Autogenerate sees only what `bot/storage/models.py` models.

    Other parts own tables and indexes of their own in the same database (APScheduler's
    `apscheduler_jobs`, audit's `scheduled_report_run` and `ix_audit_*` indexes, created
    idempotently at their start); a new revision must never drop them.
    """
    return not (reflected and compare_to is None)


def alembic_config(connection: Connection | None = None, url: str | None = None) -> Config:
    """An Alembic config built in code (no alembic.ini needed at run time)."""
    config = Config()
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


def upgrade(engine_or_url: Engine | str) -> str:
    """Bring the database to the newest revision; returns that revision.

    Takes the runtime's engine (preferred: same pool, same PostgreSQL search_path) or a URL.
    """
    if isinstance(engine_or_url, str):
        engine = create_engine(engine_or_url)
        try:
            return upgrade(engine)
        finally:
            engine.dispose()
    engine = engine_or_url
    with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            # several processes starting at once: one migrates, the others wait, then see head
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": ADVISORY_LOCK_KEY})
        tables = set(inspect(conn).get_table_names())
        config = alembic_config(conn)
        if "alembic_version" not in tables and "conversation" in tables:
            command.stamp(config, INITIAL_REVISION)
        command.upgrade(config, "head")
    return head_revision()
