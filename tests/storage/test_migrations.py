"""Migrations: `upgrade` builds exactly the schema `bot/storage/models.py` declares (both DBs)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine, inspect, text
from sqlmodel import Session, SQLModel, select

import bot.storage.models  # noqa: F401 - the tables the migrations must match
from bot.audit.store import ensure_audit_schema
from bot.storage.migrate import (
    INITIAL_REVISION,
    alembic_config,
    current_revision,
    head_revision,
    include_object,
    upgrade,
)
from bot.storage.models import Conversation


def _schema_diff(engine) -> list:
    with engine.connect() as conn:
        opts = {"compare_type": True, "include_object": include_object}
        context = MigrationContext.configure(conn, opts=opts)
        return compare_metadata(context, SQLModel.metadata)


def test_upgrade_creates_the_declared_schema(database_url: str) -> None:
    engine = create_engine(database_url)
    try:
        assert current_revision(engine) is None
        assert upgrade(engine) == head_revision()
        assert current_revision(engine) == head_revision()
        assert _schema_diff(engine) == []
        with Session(engine) as session:
            session.add(Conversation(platform="console", workspace="w", channel="c", root="r"))
            session.commit()
            assert session.exec(select(Conversation)).one().platform == "console"
    finally:
        engine.dispose()


def test_upgrade_twice_keeps_data(database_url: str) -> None:
    upgrade(database_url)
    engine = create_engine(database_url)
    try:
        with Session(engine) as session:
            session.add(Conversation(platform="console", workspace="w", channel="c", root="r"))
            session.commit()
        upgrade(engine)
        with Session(engine) as session:
            assert len(session.exec(select(Conversation)).all()) == 1
    finally:
        engine.dispose()


def test_a_database_made_by_create_all_is_adopted(database_url: str) -> None:
    """A database from before migrations existed: the initial schema, no `alembic_version`."""
    engine = create_engine(database_url)
    try:
        with engine.begin() as conn:
            command.upgrade(alembic_config(conn), INITIAL_REVISION)
            conn.execute(text("DROP TABLE alembic_version"))
        assert current_revision(engine) is None
        upgrade(engine)
        assert current_revision(engine) == head_revision()
        assert "alembic_version" in inspect(engine).get_table_names()
        assert _schema_diff(engine) == []
    finally:
        engine.dispose()


def test_objects_other_parts_own_are_left_alone(database_url: str) -> None:
    """Audit's claim table and indexes live beside ours; a diff must not propose dropping them."""
    engine = create_engine(database_url)
    try:
        upgrade(engine)
        ensure_audit_schema(engine)
        assert "scheduled_report_run" in inspect(engine).get_table_names()
        assert _schema_diff(engine) == []
        upgrade(engine)
        assert "scheduled_report_run" in inspect(engine).get_table_names()
    finally:
        engine.dispose()


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_concurrent_start_ups_migrate_once(database_url: str) -> None:
    """Several processes starting together on PostgreSQL: each ends at head, none fails."""
    script = "import sys; from bot.storage.migrate import upgrade; print(upgrade(sys.argv[1]))"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, database_url],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    outputs = [proc.communicate(timeout=120) for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0, 0], [err for _, err in outputs]
    assert [out.strip() for out, _ in outputs] == [head_revision()] * 3
    engine = create_engine(database_url)
    try:
        assert _schema_diff(engine) == []
    finally:
        engine.dispose()
