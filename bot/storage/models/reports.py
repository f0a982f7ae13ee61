"""The audit's scheduled-report table: each firing is claimed once, so one process posts it."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Column, DateTime, Text, UniqueConstraint
from sqlmodel import Field, SQLModel

from bot.clock import utcnow


class ScheduledReportRun(SQLModel, table=True):
    """One claimed firing of a scheduled audit report. APScheduler 3 shares its job store
    between processes but does not lock a due job, so each firing first inserts (job, fire
    time) here: the unique key lets exactly one process post it, the others skip."""

    __tablename__ = "scheduled_report_run"
    __table_args__ = (
        UniqueConstraint("job_id", "fire_time", name="uq_scheduled_report_run_job_fire"),
    )

    id: int | None = Field(default=None, primary_key=True)
    job_id: str = Field(max_length=200)
    fire_time: datetime = Field(sa_column=Column(DateTime(timezone=True), nullable=False))
    claimed_by: str = Field(default="", max_length=200)
    claimed_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(DateTime(timezone=True), nullable=False)
    )
    # what the firing did, once it is done: where it posted, and why a channel got nothing
    # (`AuditReportService.fire`); '' while it runs, or when its process died meanwhile
    outcome: str = Field(default="", sa_column=Column(Text, nullable=False, server_default=""))
