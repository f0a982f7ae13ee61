"""The suite's databases (tests/databases.py): every test gets a migrated database with nothing
of the test before it, on SQLite (a copy of the template) and PostgreSQL (a reused schema)."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import create_engine, inspect, text

from bot.clock import utcnow
from bot.storage.migrate import current_revision, head_revision
from tests.databases import PostgresSchemas, migrated_sqlite_template, sqlite_copy

INSERT = text(
    "INSERT INTO conversation (platform, workspace, channel, root, created_at)"
    " VALUES ('console', 'w', 'c', :root, :now) RETURNING id"
)


def test_sqlite_copies_are_migrated_and_apart(tmp_path: Path) -> None:
    template = migrated_sqlite_template(tmp_path)
    a = create_engine(sqlite_copy(template, tmp_path, "a.db"))
    b = create_engine(sqlite_copy(template, tmp_path, "b.db"))
    try:
        assert current_revision(a) == current_revision(b) == head_revision()
        with a.begin() as conn:
            conn.execute(INSERT, {"root": "r", "now": utcnow()})
        with b.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM conversation")).scalar_one() == 0
    finally:
        a.dispose()
        b.dispose()


def test_the_reused_postgresql_schema_is_as_migrated_for_every_test() -> None:
    schemas = PostgresSchemas()
    try:
        with schemas.migrated() as url:
            engine = create_engine(url)  # left open, as a careless test would
            with engine.begin() as conn:
                conn.execute(INSERT, {"root": "r", "now": utcnow()})
                conn.execute(text("CREATE TABLE beside (id int)"))
                conn.execute(text("CREATE INDEX ix_beside ON conversation (root)"))
            idle = engine.connect()
            idle.begin()
            idle.execute(text("SELECT * FROM conversation"))  # holds a lock on the table
        with schemas.migrated() as again:
            assert again == url
            fresh = create_engine(url)
            try:
                with fresh.begin() as conn:
                    assert conn.execute(text("SELECT count(*) FROM conversation")).scalar() == 0
                    assert conn.execute(INSERT, {"root": "r", "now": utcnow()}).scalar() == 1
                tables = inspect(fresh).get_table_names()
                assert "beside" not in tables and "conversation" in tables
                indexes = {i["name"] for i in inspect(fresh).get_indexes("conversation")}
                assert "ix_beside" not in indexes
                with fresh.begin() as conn:
                    conn.execute(text("DROP TABLE run_mail"))  # no longer the migrated schema
            finally:
                fresh.dispose()
        with schemas.migrated() as rebuilt:
            assert rebuilt != url
            fresh = create_engine(rebuilt)
            try:
                assert "run_mail" in inspect(fresh).get_table_names()
                assert current_revision(fresh) == head_revision()
            finally:
                fresh.dispose()
        engine.dispose()
    finally:
        schemas.close()
