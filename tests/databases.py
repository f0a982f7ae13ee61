"""Test databases, migrated once per pytest worker and handed out fresh to every test.

An Alembic upgrade costs about a second (more on a busy PostgreSQL), and hundreds of tests each
want a migrated database, so each worker migrates once and every test gets a copy:
- SQLite: the migrated template file, copied into the test's own directory;
- PostgreSQL: one migrated private schema per worker, emptied after each test (rows deleted,
  sequences restarted, anything the test added beside the migrated schema dropped); a schema
  that no longer looks migrated (a test dropped or altered a table) is dropped and rebuilt.
Tests that exercise migrations themselves ask for an empty database instead (`empty_sqlite`,
`PostgresSchemas.empty`), as every test got before.

Every PostgreSQL URL carries its schema as `application_name`, so its connections can be found:
before a schema is emptied or dropped, the connections still open on it (a test's engine not
disposed, a process that outlived its test) are ended; a leftover connection must not make
`DROP SCHEMA` wait on its locks (the deadlock seen once after a console test).
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, text
from sqlalchemy.exc import ProgrammingError, SQLAlchemyError
from sqlmodel import Session, select

from bot.storage.database import open_database

POSTGRES_ADMIN_URL = os.environ.get(
    "CHATOPS_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)


def schema_url(schema: str, admin_url: str = POSTGRES_ADMIN_URL) -> str:
    """The URL of `schema` on the admin URL's server, its connections named after it."""
    sep = "&" if "?" in admin_url else "?"
    return f"{admin_url}{sep}options=-csearch_path%3D{schema}&application_name={schema}"


def rows(database_url: str, model: type) -> list[Any]:
    """Every row of one table, as a serve process left it (read from outside the process)."""
    engine = create_engine(database_url)
    try:
        with Session(engine) as session:
            return list(session.exec(select(model)).all())
    finally:
        engine.dispose()


def migrated_sqlite_template(directory: Path) -> Path:
    """Migrate a SQLite file once (the engine is disposed: WAL checkpointed, one file left)."""
    template = directory / "template.db"
    open_database(f"sqlite:///{template}").dispose()
    return template


def sqlite_copy(template: Path, directory: Path, name: str = "chatops.db") -> str:
    """A migrated SQLite database of the test's own: a copy of the template."""
    target = directory / name
    shutil.copyfile(template, target)
    return f"sqlite:///{target}"


def empty_sqlite(directory: Path) -> str:
    """A SQLite URL whose file does not exist yet (the first connection creates it empty)."""
    return f"sqlite:///{directory / 'chatops.db'}"


class PostgresSchemas:
    """Private schemas of one pytest worker on the shared PostgreSQL server."""

    def __init__(self, admin_url: str = POSTGRES_ADMIN_URL) -> None:
        self.admin_url = admin_url
        self._admin: Engine | None = None
        self._migrated: str | None = None  # the worker's migrated schema, once made
        self._shape: tuple[frozenset[str], frozenset[str], str] | None = None

    @property
    def admin(self) -> Engine:
        if self._admin is None:
            self._admin = create_engine(self.admin_url, isolation_level="AUTOCOMMIT")
        return self._admin

    @contextmanager
    def empty(self) -> Iterator[str]:
        """A new, empty schema for one test, dropped afterwards."""
        schema = self.create()
        try:
            yield schema_url(schema, self.admin_url)
        finally:
            self.drop(schema)

    @contextmanager
    def migrated(self) -> Iterator[str]:
        """The worker's migrated schema, emptied (or rebuilt) once the test is done with it."""
        if self._migrated is None:
            schema = self.create()
            open_database(schema_url(schema, self.admin_url)).dispose()
            self._migrated = schema
            self._shape = self._shape_of(schema)
        schema = self._migrated
        try:
            yield schema_url(schema, self.admin_url)
        finally:
            if not self._reset(schema):
                self._migrated = None
                self.drop(schema)

    def drop(self, schema: str) -> None:
        """Drop `schema` once every connection still open on it has been ended."""
        with self.admin.connect() as conn:
            self._end_connections(conn, schema)
            conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))

    def close(self) -> None:
        """At the end of the session: drop the worker's migrated schema."""
        if self._migrated is not None:
            self.drop(self._migrated)
            self._migrated = None
        if self._admin is not None:
            self._admin.dispose()

    def create(self) -> str:
        """A new, empty schema (the caller drops it)."""
        schema = f"t_{uuid.uuid4().hex[:12]}"
        with self.admin.connect() as conn:
            conn.execute(text(f'CREATE SCHEMA "{schema}"'))
        return schema

    def _shape_of(self, schema: str) -> tuple[frozenset[str], frozenset[str], str]:
        """Tables, indexes and Alembic revision: what says a schema is still the migrated one."""
        with self.admin.connect() as conn:
            tables = conn.execute(
                text("SELECT tablename FROM pg_tables WHERE schemaname = :s"), {"s": schema}
            ).scalars()
            indexes = conn.execute(
                text("SELECT indexname FROM pg_indexes WHERE schemaname = :s"), {"s": schema}
            ).scalars()
            shape_tables, shape_indexes = frozenset(tables), frozenset(indexes)
            revision = ""
            if "alembic_version" in shape_tables:
                revision = (
                    conn.execute(
                        text(
                            f"SELECT string_agg(version_num, ',') FROM \"{schema}\".alembic_version"
                        )
                    ).scalar_one()
                    or ""
                )
        return shape_tables, shape_indexes, revision

    def _reset(self, schema: str) -> bool:
        """Empty the migrated schema as it was after the migration; False when it cannot be
        (a migrated table or index is gone, or the revision moved): then it is rebuilt."""
        assert self._shape is not None
        tables, indexes, revision = self._shape
        with self.admin.connect() as conn:
            self._end_connections(conn, schema)
        now_tables, now_indexes, now_revision = self._shape_of(schema)
        if not (tables <= now_tables and indexes <= now_indexes and revision == now_revision):
            return False
        try:
            self._empty(schema, now_tables - tables, now_indexes - indexes)
        except SQLAlchemyError:
            return False  # e.g. an extra index that backs a constraint: rebuild instead
        return True

    def _empty(
        self, schema: str, extra_tables: frozenset[str], extra_indexes: frozenset[str]
    ) -> None:
        """In one transaction: drop what the test added beside the migrated schema (audit's
        claim table and indexes, the scheduler's table), delete every row, restart sequences."""
        assert self._shape is not None
        tables = self._shape[0]
        with self.admin.connect() as autocommit:
            conn = autocommit.execution_options(isolation_level="READ COMMITTED")
            with conn.begin():
                for extra in sorted(extra_tables):
                    conn.execute(text(f'DROP TABLE IF EXISTS "{schema}"."{extra}" CASCADE'))
                for extra in sorted(extra_indexes):
                    conn.execute(text(f'DROP INDEX IF EXISTS "{schema}"."{extra}"'))
                _delete_rows(conn, schema, sorted(tables - {"alembic_version"}))
                sequences = conn.execute(
                    text("SELECT sequencename FROM pg_sequences WHERE schemaname = :s"),
                    {"s": schema},
                ).scalars()
                for sequence in list(sequences):
                    conn.execute(text(f'ALTER SEQUENCE "{schema}"."{sequence}" RESTART'))

    @staticmethod
    def _end_connections(conn: Connection, schema: str) -> None:
        conn.execute(
            text(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE application_name = :name AND pid <> pg_backend_pid()"
            ),
            {"name": schema},
        )


def _delete_rows(conn: Connection, schema: str, tables: list[str]) -> None:
    """Every row of `tables`, foreign keys not checked (so the order does not matter); a server
    where the test role may not skip them gets TRUNCATE (slower, same result)."""
    if not tables:
        return
    try:
        with conn.begin_nested():
            conn.execute(text("SET LOCAL session_replication_role = replica"))
    except ProgrammingError:
        names = ", ".join(f'"{schema}"."{table}"' for table in tables)
        conn.execute(text(f"TRUNCATE {names} CASCADE"))
        return
    for table in tables:
        conn.execute(text(f'DELETE FROM "{schema}"."{table}"'))
