"""What `GET /metrics` reads from the database at scrape time: the approvals pending (every
process's: the table is the truth, so it survives restarts and reads the same in every
process), the run leases this process holds, and the audit events waiting for each sink.
One short query each, in one session.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func
from sqlmodel import Session, select

from bot.statuses import UNFINISHED_RUN_STATES, ApprovalStatus
from bot.storage.dbclock import db_now
from bot.storage.models import Approval, AuditOutbox, Run

_APPROVAL = Approval.__table__.c  # type: ignore[attr-defined]
_RUN = Run.__table__.c  # type: ignore[attr-defined]
_OUTBOX = AuditOutbox.__table__.c  # type: ignore[attr-defined]


@dataclass(frozen=True)
class GaugeReadings:
    """Pending approvals by (connector, action, rule), this process's live run leases, and
    the audit events waiting in the outbox by sink."""

    pending_approvals: dict[tuple[str, str, str], int]
    leases_held: int
    audit_pending: dict[str, int]


def gauge_readings(session: Session, me: str) -> GaugeReadings:
    """The counts of `GaugeReadings`; `me`: this process's owner id."""
    groups = (_APPROVAL.connector, _APPROVAL.action, _APPROVAL.policy_rule)
    pending = session.connection().execute(
        select(*groups, func.count())
        .where(_APPROVAL.status == ApprovalStatus.PENDING)
        .group_by(*groups)
    )
    leases = session.connection().execute(
        select(func.count()).where(
            _RUN.owner == me,
            _RUN.status.in_(UNFINISHED_RUN_STATES),
            _RUN.lease_until > db_now(),
        )
    )
    waiting = session.connection().execute(
        select(_OUTBOX.sink, func.count()).group_by(_OUTBOX.sink)
    )
    return GaugeReadings(
        pending_approvals={(c or "", a or "", r or ""): n for c, a, r, n in pending},
        leases_held=int(leases.scalar_one()),
        audit_pending={sink: int(n) for sink, n in waiting},
    )
