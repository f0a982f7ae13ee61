"""Audit's own schema: the scheduled-report claim table and the call-log indexes reports need.

Kept out of `bot/storage/models.py` (and out of its Alembic history) on purpose: they belong to the
audit feature and are created idempotently at scheduler start (`ensure_audit_schema`).

Why a claim table: APScheduler 3 shares its job store between processes but does not lock a
due job, so two bot processes can both run the same firing. Each firing first inserts
(job_id, fire_time) here; the unique constraint lets exactly one process win, the others skip.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    Column,
    DateTime,
    Engine,
    Integer,
    MetaData,
    String,
    Table,
    UniqueConstraint,
    func,
    insert,
    select,
    text,
)
from sqlalchemy.exc import IntegrityError

from bot.clock import as_utc, utcnow
from bot.storage.models import ApprovalDecision

metadata = MetaData()

scheduled_report_run = Table(
    "scheduled_report_run",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("job_id", String(200), nullable=False),
    Column("fire_time", DateTime(timezone=True), nullable=False),
    Column("claimed_by", String(200), nullable=False, default=""),
    Column("claimed_at", DateTime(timezone=True), nullable=False),
    UniqueConstraint("job_id", "fire_time", name="uq_scheduled_report_run_job_fire"),
)

# Covering indexes for the report's queries, so none reads call_log rows it does not list:
# grouped counts and top errors scan (connector, action, requester, ..., error) in GROUP BY
# order; percentiles walk (connector, action, duration_ms, ...) in order; `--user` looks up
# decisions by user. (The call list pages through ix_call_log_at.) Two call_log indexes only:
# each one costs every insert a little, and a build on an existing log.
CALL_LOG_INDEXES = (
    "CREATE INDEX IF NOT EXISTS ix_audit_call_log_groups ON call_log "
    "(connector, action, requester, at, result_status, mutating, error)",
    "CREATE INDEX IF NOT EXISTS ix_audit_call_log_durations ON call_log "
    "(connector, action, duration_ms, at, result_status)",
    "CREATE INDEX IF NOT EXISTS ix_audit_approval_decision_user "
    f"ON {ApprovalDecision.__tablename__} (user_id, approval_id)",
)


def ensure_audit_schema(engine: Engine) -> None:
    """Create the claim table and the audit indexes if they are missing (idempotent)."""
    metadata.create_all(engine, checkfirst=True)
    with engine.begin() as conn:
        for statement in CALL_LOG_INDEXES:
            conn.execute(text(statement))


def claim_run(engine: Engine, job_id: str, fire_time: datetime, claimed_by: str = "") -> bool:
    """True for the one process that may run this firing; False when another already has."""
    try:
        with engine.begin() as conn:
            conn.execute(
                insert(scheduled_report_run).values(
                    job_id=job_id,
                    fire_time=as_utc(fire_time),
                    claimed_by=claimed_by[:200],
                    claimed_at=utcnow(),
                )
            )
    except IntegrityError:
        return False
    return True


def previous_run(engine: Engine, job_id: str, before: datetime) -> datetime | None:
    """The latest claimed firing of `job_id` before `before` (the previous report's end)."""
    with engine.connect() as conn:
        value = conn.execute(
            select(func.max(scheduled_report_run.c.fire_time)).where(
                scheduled_report_run.c.job_id == job_id,
                scheduled_report_run.c.fire_time < as_utc(before),
            )
        ).scalar_one_or_none()
    return None if value is None else as_utc(value)


def claimed_runs(engine: Engine, job_id: str) -> list[tuple[datetime, str]]:
    """Every claimed firing of `job_id`, oldest first: (fire time, claimed by)."""
    with engine.connect() as conn:
        rows = conn.execute(
            select(scheduled_report_run.c.fire_time, scheduled_report_run.c.claimed_by)
            .where(scheduled_report_run.c.job_id == job_id)
            .order_by(scheduled_report_run.c.fire_time)
        ).all()
    return [(as_utc(row.fire_time), row.claimed_by) for row in rows]
