"""A seeded call log with known figures: executed, failed, blocked, rejected and expired calls
over two connectors, four requesters and three approvers (one self-approval).

Window of the tests: `NOW - 7d` to `NOW`. One row lies outside it (8 days ago) and must never
count; neither do the thumbs on a run started then (run R1's answer has two up, one down).
Runs: R1 done, R2 and R3 failed (their model refused its key: no call, an error quoting a
secret that reports must mask), R0 before the window (still running).
Expected figures are worked out by hand in the tests, not recomputed from this data.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Engine
from sqlmodel import Session, select

from bot.clock import as_utc
from bot.storage.database import Database, create_db_engine, init_schema
from bot.storage.models import (
    Approval,
    ApprovalDecision,
    CallLog,
    Conversation,
    Run,
    RunFeedback,
    ScheduledReportRun,
)
from tests.fakes.fixtures import fake_openai  # noqa: F401 - the audit sinks' end-to-end run

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
SECRET = "sk-live-0123456789abcdef"
# as a run's error would read had it slipped past the runner's redaction (reports mask it again)
REFUSED = f"LLMError: the model endpoint 127.0.0.1 refused the key (401), sent Bearer {SECRET}"


def at(hours_ago: float) -> datetime:
    return NOW - timedelta(hours=hours_ago)


# (id, requester, connector, action, status, created h ago, decided after s, decisions)
APPROVALS: list[tuple[str, str, str, str, str, float, float | None, list[tuple[str, str]]]] = [
    ("A1", "U_ALICE", "pagerduty", "acknowledge", "approved", 48, 60, [("U_LEAD", "approve")]),
    ("A2", "U_BOB", "pagerduty", "acknowledge", "rejected", 40, 300, [("U_LEAD", "reject")]),
    ("A3", "U_BOB", "k8s", "restart", "expired", 30, None, []),
    ("A4", "U_CAROL", "k8s", "restart", "approved", 20, 30, [("U_CAROL", "approve")]),
    ("A5", "U_ALICE", "k8s", "restart", "approved", 10, 120, [("U_DAVE", "approve")]),
    ("A6", "U_ALICE", "k8s", "restart", "approved", 5, 600, [("U_LEAD", "approve")]),
]

# (hours ago, requester, connector, action, mutating, approval, approval_status,
#  result_status, duration_ms, error, arguments)
CALLS: list[tuple[Any, ...]] = [
    (
        50,
        "U_ALICE",
        "pagerduty",
        "list_incidents",
        False,
        None,
        "not_required",
        "ok",
        100.0,
        None,
        {"status": "triggered"},
    ),
    (
        49,
        "U_BOB",
        "pagerduty",
        "list_incidents",
        False,
        None,
        "not_required",
        "ok",
        300.0,
        None,
        {"status": "triggered"},
    ),
    (
        47,
        "U_ALICE",
        "pagerduty",
        "list_incidents",
        False,
        None,
        "not_required",
        "error",
        50.0,
        "HTTP 503 from pagerduty",
        {"status": "resolved"},
    ),
    (
        47.9,
        "U_ALICE",
        "pagerduty",
        "acknowledge",
        True,
        "A1",
        "approved",
        "ok",
        200.0,
        None,
        {"id": "P1", "api_token": SECRET},
    ),
    (
        39.9,
        "U_BOB",
        "pagerduty",
        "acknowledge",
        True,
        "A2",
        "rejected",
        "rejected",
        0.0,
        "rejected by U_LEAD: not yours",
        {"id": "P2"},
    ),
    (
        29,
        "U_BOB",
        "k8s",
        "restart",
        True,
        "A3",
        "expired",
        "expired",
        0.0,
        "approval timed out",
        {"deployment": "api"},
    ),
    (
        19.9,
        "U_CAROL",
        "k8s",
        "restart",
        True,
        "A4",
        "approved",
        "error",
        400.0,
        "deployment not found",
        {"deployment": "web"},
    ),
    (
        15,
        "U_ALICE",
        "k8s",
        "restart",
        True,
        None,
        "not_required",
        "blocked",
        0.0,
        "rate limit: 5 calls per minute",
        {"deployment": "api"},
    ),
    (
        12,
        "U_CAROL",
        "k8s",
        "get_pods",
        False,
        None,
        "not_required",
        "ok",
        20.0,
        None,
        {"namespace": "prod"},
    ),
    (
        9.9,
        "U_ALICE",
        "k8s",
        "restart",
        True,
        "A5",
        "approved",
        "ok",
        1000.0,
        None,
        {"deployment": "api"},
    ),
    (
        4.8,
        "U_ALICE",
        "k8s",
        "restart",
        True,
        "A6",
        "approved",
        "error",
        600.0,
        "deployment not found",
        {"deployment": "worker"},
    ),
    (
        8 * 24,
        "U_ALICE",
        "pagerduty",
        "list_incidents",
        False,
        None,
        "not_required",
        "ok",
        5.0,
        None,
        {"status": "triggered"},
    ),
]


FEEDBACK = [("R1", "U_ALICE", "up"), ("R1", "U_BOB", "down"), ("R1", "U_LEAD", "up"),
            ("R0", "U_ALICE", "down")]  # fmt: skip


def seed(engine: Engine) -> None:
    """Write the conversation, runs, approvals, decisions and call-log rows above."""
    with Session(engine) as session:
        conv = Conversation(platform="slack", workspace="T1", channel="C_OPS", root="1.0")
        session.add(conv)
        session.flush()
        assert conv.id is not None
        run = Run(id="R1", conversation_id=conv.id, requester="U_ALICE", started_at=at(60),
                  status="done", finished_at=at(59))  # fmt: skip
        session.add(run)
        # two runs whose model refused its key (no call made: only the runs table knows)
        for rid, ago in (("R2", 30), ("R3", 3)):
            session.add(
                Run(
                    id=rid,
                    conversation_id=conv.id,
                    requester="U_BOB",
                    started_at=at(ago),
                    status="failed",
                    finished_at=at(ago),
                    error=REFUSED,
                )
            )
        session.flush()
        for aid, requester, connector, action, status, ago, after, decisions in APPROVALS:
            created = at(ago)
            decided = created + timedelta(seconds=after) if after is not None else None
            session.add(
                Approval(
                    id=aid,
                    run_id="R1",
                    conversation_id=conv.id,
                    tool_call_id=f"call_{aid}",
                    tool_name=f"{connector}__{action}",
                    connector=connector,
                    action=action,
                    fingerprint=aid,
                    requester=requester,
                    approvers=["U_LEAD", "U_DAVE", "U_CAROL"],
                    status=status,
                    decided_by=[user for user, _ in decisions],
                    created_at=created,
                    expires_at=created + timedelta(hours=1),
                    decided_at=decided,
                )
            )
            session.flush()
            for user, decision in decisions:
                session.add(
                    ApprovalDecision(
                        approval_id=aid, user_id=user, decision=decision, decided_at=decided
                    )
                )
        approved_by = {
            a[0]: [user for user, decision in a[7] if decision == "approve"] for a in APPROVALS
        }
        for i, row in enumerate(CALLS):
            ago, requester, connector, action, mutating, aid, astatus, rstatus, ms, err, args = row
            session.add(
                CallLog(
                    at=at(ago),
                    conversation_id=conv.id,
                    run_id="R1",
                    tool_call_id=f"call_{i}",
                    platform="slack",
                    channel="C_OPS",
                    requester=requester,
                    connector=connector,
                    action=action,
                    tool_name=f"{connector}__{action}",
                    mutating=mutating,
                    arguments=args,
                    fingerprint=f"fp{i}",
                    approval_id=aid,
                    approval_status=astatus,
                    # the manifest rule that decided: restarts of `api` match "production"
                    policy_rule="production" if args.get("deployment") == "api" else "",
                    approvers=approved_by.get(aid or "", []),
                    result_status=rstatus,
                    duration_ms=ms,
                    error=err,
                )
            )
        # thumbs on R1's answer (two up, one down), and on a run started before the window
        old = Run(id="R0", conversation_id=conv.id, requester="U_BOB", started_at=at(8 * 24))
        session.add(old)
        session.flush()
        for run_id, user, rating in FEEDBACK:
            session.add(RunFeedback(run_id=run_id, platform="slack", user_id=user, rating=rating))
        session.commit()


@pytest.fixture
def audit_engine(database_url: str) -> Iterator[Engine]:
    """A migrated database (both backends) holding the seeded call log."""
    engine = create_db_engine(database_url)
    init_schema(engine)
    seed(engine)
    try:
        yield engine
    finally:
        engine.dispose()


@pytest.fixture
def audit_db(audit_engine: Engine) -> Iterator[Database]:
    """The app's `Database` over the seeded database, as the runtime hands it to audit."""
    db = Database(audit_engine)
    try:
        yield db
    finally:
        db.close()


def claimed_runs(db: Database, job_id: str) -> list[tuple[datetime, str]]:
    """The claimed firings of `job_id` in the claim table, oldest first: (fire time, by whom)."""

    def read(session: Session) -> list[tuple[datetime, str]]:
        rows = session.exec(
            select(ScheduledReportRun)
            .where(ScheduledReportRun.job_id == job_id)
            .order_by(ScheduledReportRun.fire_time)  # type: ignore[arg-type]
        ).all()
        return [(as_utc(row.fire_time), row.claimed_by) for row in rows]

    return db.call(read)
