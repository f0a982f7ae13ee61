"""Migrations: `upgrade` builds exactly the schema `bot/storage/models/` declares (both DBs)."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
from sqlalchemy import (
    JSON,
    Column,
    DateTime,
    Integer,
    MetaData,
    String,
    Table,
    UniqueConstraint,
    create_engine,
    inspect,
    text,
)
from sqlmodel import Session, SQLModel, select

import bot.storage.models  # noqa: F401 - the tables the migrations must match
from bot.clock import as_utc, utcnow
from bot.storage.audit import claim_report_run
from bot.storage.database import Database
from bot.storage.migrate import (
    INITIAL_REVISION,
    alembic_config,
    current_revision,
    head_revision,
    include_object,
    upgrade,
)
from bot.storage.models import ApprovalGrant, Conversation, ScheduledReportRun

pytestmark = [pytest.mark.both_databases, pytest.mark.empty_database]  # it migrates


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
    """APScheduler's job store lives beside our tables; a diff must not propose dropping it."""
    engine = create_engine(database_url)
    try:
        upgrade(engine)
        SQLAlchemyJobStore(engine=engine).jobs_t.create(engine)  # as the audit scheduler's start
        assert "apscheduler_jobs" in inspect(engine).get_table_names()
        assert _schema_diff(engine) == []
        upgrade(engine)
        assert "apscheduler_jobs" in inspect(engine).get_table_names()
    finally:
        engine.dispose()


# What the audit created outside the migrations, at scheduler start, before 0014 (a copy of the
# removed `bot/audit/store.py`): databases that ran it hold these.
_LEGACY_AUDIT = MetaData()
Table(
    "scheduled_report_run",
    _LEGACY_AUDIT,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("job_id", String(200), nullable=False),
    Column("fire_time", DateTime(timezone=True), nullable=False),
    Column("claimed_by", String(200), nullable=False, default=""),
    Column("claimed_at", DateTime(timezone=True), nullable=False),
    UniqueConstraint("job_id", "fire_time", name="uq_scheduled_report_run_job_fire"),
)
_LEGACY_AUDIT_INDEXES = (
    "CREATE INDEX IF NOT EXISTS ix_audit_call_log_groups ON call_log "
    "(connector, action, requester, at, result_status, mutating, error)",
    "CREATE INDEX IF NOT EXISTS ix_audit_call_log_durations ON call_log "
    "(connector, action, duration_ms, at, result_status)",
    "CREATE INDEX IF NOT EXISTS ix_audit_approval_decision_user "
    "ON approvaldecision (user_id, approval_id)",
)
_AUDIT_INDEXES = {
    "call_log": {"ix_audit_call_log_summary", "ix_audit_call_log_durations"},
    "approvaldecision": {"ix_audit_approval_decision_user"},
}


def _claims(db: Database) -> list[tuple[datetime, str]]:
    def read(session: Session) -> list[tuple[datetime, str]]:
        rows = session.exec(select(ScheduledReportRun).order_by(ScheduledReportRun.id)).all()
        return [(as_utc(row.fire_time), row.claimed_by) for row in rows]

    return db.call(read)


def _audit_indexes(engine) -> dict[str, set[str]]:
    found = {t: {i["name"] for i in inspect(engine).get_indexes(t)} for t in _AUDIT_INDEXES}
    return {t: names & _AUDIT_INDEXES[t] for t, names in found.items()}


def test_a_fresh_database_gets_the_audit_table_and_indexes(database_url: str) -> None:
    """0014: the claim table and the report's indexes come from the migrations alone."""
    engine = create_engine(database_url)
    try:
        upgrade(engine)
        assert "scheduled_report_run" in inspect(engine).get_table_names()
        assert _audit_indexes(engine) == _AUDIT_INDEXES
        db = Database(engine)
        try:
            fired = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
            assert db.call(claim_report_run, "audit-report", fired, "proc-a")
            assert not db.call(claim_report_run, "audit-report", fired, "proc-b")
            assert _claims(db) == [(fired, "proc-a")]
        finally:
            db.close()
    finally:
        engine.dispose()


@pytest.mark.parametrize("indexes", [len(_LEGACY_AUDIT_INDEXES), 1], ids=["all", "some"])
def test_audit_tables_made_before_0014_are_adopted(database_url: str, indexes: int) -> None:
    """A database where the audit made its table and indexes itself (all of them, or a start
    interrupted after the first index): 0014 keeps the table and its claims, adds what is
    missing, and the result is the declared schema."""
    engine = create_engine(database_url)
    fired = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
    try:
        with engine.begin() as conn:
            command.upgrade(alembic_config(conn), "0013_auditruns_run_index")
            _LEGACY_AUDIT.create_all(conn)
            for statement in _LEGACY_AUDIT_INDEXES[:indexes]:
                conn.execute(text(statement))
            _insert(conn, "scheduled_report_run", job_id="audit-report", fire_time=fired,
                    claimed_by="proc-old")  # fmt: skip
        assert upgrade(engine) == head_revision()
        assert _schema_diff(engine) == []
        assert _audit_indexes(engine) == _AUDIT_INDEXES
        db = Database(engine)
        try:
            assert _claims(db) == [(fired, "proc-old")]
            assert not db.call(claim_report_run, "audit-report", fired, "proc-new")
        finally:
            db.close()
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


def _insert(conn, name: str, **values) -> None:
    """One row in a table as the database has it now (reflected, so a column a later migration
    adds elsewhere never breaks this): every required column not given gets a neutral value."""
    table = Table(name, MetaData(), autoload_with=conn)
    for column in table.columns:
        if column.name in values or column.nullable or column.server_default is not None:
            continue
        if column.primary_key and isinstance(column.type, Integer):
            continue
        python = column.type.python_type if not isinstance(column.type, JSON) else list
        neutral = {str: "", int: 0, float: 0.0, bool: False, list: [], dict: {}}
        values[column.name] = utcnow() if python is datetime else neutral[python]
    conn.execute(table.insert().values(**values))


def test_grants_made_before_they_were_bound_to_their_rule_get_the_rule_of_their_approval(
    database_url: str,
) -> None:
    """0011: an existing grant takes the rule and approvers of the approval it was made on, so
    the gate can judge it; one written without them later keeps NULL (it covers nothing)."""
    engine = create_engine(database_url)
    try:
        with engine.begin() as conn:
            command.upgrade(alembic_config(conn), "0010_run_leases")
            _insert(conn, "conversation", id=1, platform="slack", workspace="T", channel="C",
                    root="1")  # fmt: skip
            _insert(conn, "run", id="r1", conversation_id=1)
            _insert(conn, "approval", id="a1", run_id="r1", conversation_id=1,
                    tool_call_id="c1", tool_name="ops__scale", fingerprint="f",
                    policy_rule="nights go to the lead", approvers=["U0LEAD"],
                    expires_at=utcnow())  # fmt: skip
            _insert(conn, "approval_grant", id="g1", conversation_id=1, tool_name="ops__scale",
                    fingerprint="g", grantees=["U0DEV"], granted_by="U0LEAD",
                    approval_id="a1", expires_at=utcnow())  # fmt: skip
        upgrade(engine)
        with Session(engine) as session:
            grant = session.get(ApprovalGrant, "g1")
            assert grant is not None
            assert grant.policy_rule == "nights go to the lead" and grant.approvers == ["U0LEAD"]
    finally:
        engine.dispose()


def _call_log_indexes(engine) -> set[str]:
    return {i["name"] for i in inspect(engine).get_indexes("call_log")} & {
        "ix_audit_call_log_groups",
        "ix_audit_call_log_summary",
    }


def test_0016_puts_the_summary_index_in_place_of_the_groups_index(database_url: str) -> None:
    """A log at 0014 (the groups index): 0016 builds the summary index the report's
    one scan reads and drops the one it replaces; downgrading puts the groups index back."""
    engine = create_engine(database_url)
    try:
        with engine.begin() as conn:
            command.upgrade(alembic_config(conn), "0014_audit_table_in_alembic")
        assert _call_log_indexes(engine) == {"ix_audit_call_log_groups"}
        assert upgrade(engine) == head_revision()
        assert _call_log_indexes(engine) == {"ix_audit_call_log_summary"}
        assert _schema_diff(engine) == []
        with engine.begin() as conn:
            command.downgrade(alembic_config(conn), "0014_audit_table_in_alembic")
        assert _call_log_indexes(engine) == {"ix_audit_call_log_groups"}
        assert upgrade(engine) == head_revision()  # and up again
        assert _call_log_indexes(engine) == {"ix_audit_call_log_summary"}
    finally:
        engine.dispose()


def test_0023_gives_existing_calls_their_conversations_workspace(database_url: str) -> None:
    """0023: call-log rows written before it carry their conversation's workspace ('' with
    no conversation), and slack_sdk's install tables exist; downgrading removes both."""
    engine = create_engine(database_url)
    try:
        with engine.begin() as conn:
            command.upgrade(alembic_config(conn), "0022_approval_batches")
            _insert(conn, "conversation", id=1, platform="slack", workspace="T0AAA",
                    channel="C", root="1")  # fmt: skip
            _insert(conn, "call_log", id=1, conversation_id=1, at=utcnow())
            _insert(conn, "call_log", id=2, conversation_id=None, at=utcnow())
        assert upgrade(engine) == head_revision()
        with engine.connect() as conn:
            rows = conn.execute(text("SELECT id, workspace FROM call_log ORDER BY id")).all()
        assert [tuple(r) for r in rows] == [(1, "T0AAA"), (2, "")]
        tables = set(inspect(engine).get_table_names())
        assert {"slack_installations", "slack_bots", "slack_oauth_states"} <= tables
        assert _schema_diff(engine) == []
        with engine.begin() as conn:
            command.downgrade(alembic_config(conn), "0022_approval_batches")
        assert "slack_installations" not in set(inspect(engine).get_table_names())
        assert "workspace" not in {c["name"] for c in inspect(engine).get_columns("call_log")}
    finally:
        engine.dispose()
