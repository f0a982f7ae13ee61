"""Per-person caps, counted in the database: unfinished runs and pending approvals of one user.

One person's scripted mentions must not take every run slot of the deployment, nor keep an
unbounded number of cards waiting. The count is taken from the rows (every process's runs and
approvals, not only this process's), inside the transaction that would add the new row, with the
person's key locked meanwhile (PostgreSQL: a transaction-scoped advisory lock; SQLite has one
writer at a time), so two processes admitting the same person at once cannot both pass a cap
that has one place left.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from sqlalchemy import func, text
from sqlmodel import Session, col, select

from bot.errors import UserError
from bot.statuses import UNFINISHED_RUN_STATES, ApprovalStatus
from bot.storage.models import Approval, Run

Kind = Literal["runs", "approvals"]


class PersonalLimitReached(UserError):
    """`person` already has `limit` unfinished runs (`kind="runs"`) or pending approvals."""

    def __init__(self, kind: Kind, person: str, limit: int) -> None:
        super().__init__(f"{person} has {limit} {kind} in progress (the per-person limit)")
        self.kind = kind
        self.person = person
        self.limit = limit


@dataclass(frozen=True)
class PersonalCap:
    """What to check before adding a row for `person`: at most `limit` of `kind` at once."""

    kind: Kind
    person: str
    limit: int


def lock_person(session: Session, kind: Kind, person: str) -> None:
    """Serialise admissions of one person until the transaction ends (PostgreSQL only)."""
    if session.get_bind().dialect.name != "postgresql":
        return
    digest = hashlib.blake2b(f"chatops:{kind}:{person}".encode(), digest_size=8).digest()
    key = int.from_bytes(digest, "big", signed=True)
    session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": key})


def unfinished_runs_of(session: Session, person: str) -> int:
    """Runs `person` started that have not ended (working, waiting for approval, answering)."""
    statement = select(func.count()).where(
        Run.requester == person, col(Run.status).in_(UNFINISHED_RUN_STATES)
    )
    return int(session.exec(statement).one())


def pending_approvals_of(session: Session, person: str, now: datetime) -> int:
    """Approvals still waiting for a decision (and not past their deadline) that `person`
    requested."""
    statement = select(func.count()).where(
        Approval.requester == person,
        Approval.status == ApprovalStatus.PENDING,
        Approval.expires_at > now,
    )
    return int(session.exec(statement).one())


def admit(session: Session, cap: PersonalCap, *, now: datetime | None = None) -> None:
    """Lock the person, count, and raise `PersonalLimitReached` when the cap is full (the
    caller's transaction then rolls back: nothing is added). An anonymous person (no user id)
    is not capped here: the process-wide cap still holds."""
    if not cap.person:
        return
    lock_person(session, cap.kind, cap.person)
    if cap.kind == "runs":
        count = unfinished_runs_of(session, cap.person)
    else:
        assert now is not None, "pending approvals are counted at a time"
        count = pending_approvals_of(session, cap.person, now)
    if count >= cap.limit:
        raise PersonalLimitReached(cap.kind, cap.person, cap.limit)
