"""Queries of the scheduled audit reports' claims (`ScheduledReportRun`): claim a firing, record
what it did, find the previous one. Run through
`bot.storage.database.Database.run` like `bot.storage.queries`.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, select

from bot.clock import as_utc, utcnow
from bot.storage.models import ScheduledReportRun

_RUN = ScheduledReportRun.__table__.c  # type: ignore[attr-defined]


def claim_report_run(
    session: Session, job_id: str, fire_time: datetime, claimed_by: str = ""
) -> bool:
    """True for the one process that may run this firing; False when another already has."""
    try:
        with session.begin_nested():
            session.add(
                ScheduledReportRun(
                    job_id=job_id,
                    fire_time=as_utc(fire_time),
                    claimed_by=claimed_by[:200],
                    claimed_at=utcnow(),
                )
            )
    except IntegrityError:
        return False
    return True


def previous_report_run(session: Session, job_id: str, before: datetime) -> datetime | None:
    """The latest claimed firing of `job_id` before `before` (the previous report's end)."""
    value = session.execute(
        select(func.max(_RUN.fire_time)).where(
            _RUN.job_id == job_id, _RUN.fire_time < as_utc(before)
        )
    ).scalar_one_or_none()
    return None if value is None else as_utc(value)


def record_report_outcome(session: Session, job_id: str, fire_time: datetime, outcome: str) -> None:
    """What a claimed firing did (`FireOutcome.summary`), on its own row."""
    session.execute(
        update(ScheduledReportRun)
        .where(_RUN.job_id == job_id, _RUN.fire_time == as_utc(fire_time))
        .values(outcome=outcome[:4000])
    )
