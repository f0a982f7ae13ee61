"""The report model over the seeded call log, on SQLite and PostgreSQL: figures worked out by
hand from tests/audit/conftest.py (11 calls in the window, one 8 days old that never counts)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import Engine
from sqlmodel import Session

from bot.audit.report import AuditQuery, _grouped_counts, _top_errors, build_report, iter_calls
from bot.storage.models import CallLog
from tests.audit.conftest import NOW, SECRET

pytestmark = pytest.mark.both_databases  # the report's SQL differs per dialect


def report(engine: Engine, window: str = "7d", **filters):
    return build_report(engine, AuditQuery.window(window, now=NOW, **filters), now=NOW)


def test_totals_per_action_and_requester(audit_engine: Engine) -> None:
    r = report(audit_engine)
    t = r.totals
    assert (t.calls, t.ok, t.errors, t.blocked, t.rejected, t.expired) == (11, 5, 3, 1, 1, 1)
    assert (t.mutating, t.requesters) == (7, 3)
    actions = [
        (a.connector, a.action, a.calls, a.ok, a.errors, a.blocked, a.rejected, a.expired)
        + (a.p50_ms, a.p95_ms)
        for a in r.actions
    ]
    assert actions == [
        ("k8s", "restart", 5, 1, 2, 1, 0, 1, 600.0, 1000.0),
        ("pagerduty", "list_incidents", 3, 2, 1, 0, 0, 0, 100.0, 300.0),
        ("pagerduty", "acknowledge", 2, 1, 0, 0, 1, 0, 200.0, 200.0),
        ("k8s", "get_pods", 1, 1, 0, 0, 0, 0, 20.0, 20.0),
    ]
    people = [
        (p.requester, p.calls, p.ok, p.errors, p.blocked, p.rejected, p.expired, p.mutating)
        for p in r.requesters
    ]
    assert people == [
        ("U_ALICE", 6, 3, 2, 1, 0, 0, 4),
        ("U_BOB", 3, 1, 0, 0, 1, 1, 2),
        ("U_CAROL", 2, 1, 1, 0, 0, 0, 1),
    ]


def test_approvals_and_approvers(audit_engine: Engine) -> None:
    r = report(audit_engine)
    a = r.approvals
    assert (a.requested, a.approved, a.rejected, a.expired, a.cancelled, a.pending) == (
        6,
        4,
        1,
        1,
        0,
        0,
    )
    assert a.median_decision_s == 120.0  # decided after 30, 60, 120, 300, 600 s
    assert a.self_approvals == 1
    assert [(p.approver, p.approved, p.rejected, p.self_approvals) for p in r.approvers] == [
        ("U_LEAD", 2, 1, 0),
        ("U_CAROL", 1, 0, 1),
        ("U_DAVE", 1, 0, 0),
    ]


def test_mutating_calls_listed_with_who_and_redacted_arguments(audit_engine: Engine) -> None:
    r = report(audit_engine)
    assert r.mutating_calls_total == 7 and r.mutating_calls_omitted == 0
    listed = [
        (c.at, c.requester, c.action, c.approval_status, c.approved_by, c.rejected_by)
        + (c.result_status,)
        for c in r.mutating_calls
    ]
    h = timedelta(hours=1)
    assert listed == [
        (NOW - 47.9 * h, "U_ALICE", "acknowledge", "approved", ["U_LEAD"], [], "ok"),
        (NOW - 39.9 * h, "U_BOB", "acknowledge", "rejected", [], ["U_LEAD"], "rejected"),
        (NOW - 29 * h, "U_BOB", "restart", "expired", [], [], "expired"),
        (NOW - 19.9 * h, "U_CAROL", "restart", "approved", ["U_CAROL"], [], "error"),
        (NOW - 15 * h, "U_ALICE", "restart", "not_required", [], [], "blocked"),
        (NOW - 9.9 * h, "U_ALICE", "restart", "approved", ["U_DAVE"], [], "ok"),
        (NOW - 4.8 * h, "U_ALICE", "restart", "approved", ["U_LEAD"], [], "error"),
    ]
    assert r.mutating_calls[0].arguments == {"id": "P1", "api_token": "[REDACTED]"}
    assert SECRET not in r.model_dump_json()


def test_most_frequent_errors(audit_engine: Engine) -> None:
    r = report(audit_engine)
    assert [(e.count, e.connector, e.action, e.error, e.last_at) for e in r.errors] == [
        (2, "k8s", "restart", "deployment not found", NOW - timedelta(hours=4.8)),
        (1, "pagerduty", "list_incidents", "HTTP 503 from pagerduty", NOW - timedelta(hours=47)),
    ]


def test_user_filter_matches_requester_or_approver(audit_engine: Engine) -> None:
    lead = report(audit_engine, user="U_LEAD")  # decided A1, A2, A6; requested nothing
    assert (lead.totals.calls, lead.totals.ok, lead.totals.rejected, lead.totals.errors) == (
        3,
        1,
        1,
        1,
    )
    assert (lead.approvals.requested, lead.approvals.approved, lead.approvals.rejected) == (3, 2, 1)
    assert lead.approvals.median_decision_s == 300.0  # 60, 300, 600 s
    carol = report(audit_engine, user="U_CAROL")  # requested 2 calls, approved her own A4
    assert (carol.totals.calls, carol.approvals.requested, carol.approvals.self_approvals) == (
        2,
        1,
        1,
    )


def test_connector_action_and_window_filters(audit_engine: Engine) -> None:
    k8s = report(audit_engine, connector="k8s")
    assert (k8s.totals.calls, k8s.approvals.requested, k8s.approvals.approved) == (6, 4, 3)
    assert k8s.approvals.median_decision_s == 120.0  # 30, 120, 600 s
    restart = report(audit_engine, connector="k8s", action="restart")
    assert [(a.action, a.calls) for a in restart.actions] == [("restart", 5)]
    day = report(audit_engine, "1d")
    assert (day.totals.calls, day.approvals.requested, day.mutating_calls_total) == (5, 3, 4)
    month = report(audit_engine, "30d")  # now the 8-day-old call counts too
    assert month.totals.calls == 12


def test_wide_window_plan_gives_the_same_figures(audit_engine: Engine) -> None:
    """With the audit indexes (migrations 0014 and 0016), a window covering the whole log
    takes the ordered-scan plan on SQLite; the figures must not change."""
    if audit_engine.dialect.name == "sqlite":
        grouped = _grouped_counts(AuditQuery.window("30d", now=NOW), ordered_scan=True)
        sql = str(grouped.compile(audit_engine, compile_kwargs={"literal_binds": True}))
        with audit_engine.connect() as conn:
            plan = " ".join(str(row) for row in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + sql))
        assert "COVERING INDEX ix_audit_call_log_summary" in plan and "TEMP B-TREE" not in plan
        errors = _top_errors(AuditQuery.window("30d", now=NOW), ordered_scan=True)
        sql = str(errors.compile(audit_engine, compile_kwargs={"literal_binds": True}))
        with audit_engine.connect() as conn:
            plan = " ".join(str(row) for row in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + sql))
        assert "COVERING INDEX ix_audit_call_log_summary" in plan
    r = report(audit_engine, "30d")
    assert (r.totals.calls, r.totals.ok, r.totals.mutating, len(r.requesters)) == (12, 6, 7, 3)
    assert [(a.action, a.calls) for a in r.actions][:2] == [("restart", 5), ("list_incidents", 4)]


def test_call_list_cap_and_streaming_export(audit_engine: Engine) -> None:
    capped = build_report(audit_engine, AuditQuery.window("7d", now=NOW, max_calls=2), now=NOW)
    assert (len(capped.mutating_calls), capped.mutating_calls_omitted) == (2, 5)
    streamed = list(iter_calls(audit_engine, AuditQuery.window("7d", now=NOW), batch=3))
    assert len(streamed) == 11
    assert [c.at for c in streamed] == sorted(c.at for c in streamed)
    assert streamed[2].approved_by == ["U_LEAD"]  # decisions looked up per batch


def test_empty_window(audit_engine: Engine) -> None:
    r = build_report(
        audit_engine,
        AuditQuery(since=NOW + timedelta(days=1), until=NOW + timedelta(days=2)),
        now=NOW,
    )
    assert r.totals.calls == 0 and r.actions == [] and r.mutating_calls == []
    assert r.approvals.requested == 0 and r.approvals.median_decision_s is None


@pytest.mark.parametrize(
    ("since", "until", "message"),
    [
        ("7x", None, "bad time '7x'"),
        ("1d", "7d", "ends before it starts"),
        ("2026-11-20", "2026-11-19", "ends before it starts"),
        ("10000000w", None, "bad time '10000000w': that is before the year 1"),
        ("99999999999999999999d", None, "bad time '99999999999999999999d'"),
    ],
)
def test_bad_windows_are_readable(since: str, until: str | None, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        AuditQuery.window(since, until, now=NOW)


def test_iso_bounds_are_utc() -> None:
    q = AuditQuery.window("2026-11-01", "2026-11-02T06:00+02:00", now=NOW)
    assert q.since.isoformat() == "2026-11-01T00:00:00+00:00"
    assert q.until.isoformat() == "2026-11-02T04:00:00+00:00"


def test_secrets_in_arguments_and_errors_are_redacted_again(audit_engine: Engine) -> None:
    """The call-log hook redacts before writing; the report redacts again (defence in depth)."""
    when = NOW + timedelta(days=1)
    with Session(audit_engine) as session:
        session.add(
            CallLog(
                at=when,
                requester="U_ALICE",
                connector="vault",
                action="rotate",
                mutating=True,
                arguments={"path": "db", "password": "hunter2-long", "auth": {"token": "t0k3n"}},
                result_status="error",
                error="HTTP 401 with Authorization: Bearer abcDEF1234567890",
            )
        )
        session.commit()
    r = build_report(
        audit_engine, AuditQuery(since=when - timedelta(hours=1), until=when + timedelta(hours=1))
    )
    call = r.mutating_calls[0]
    assert call.arguments == {
        "path": "db",
        "password": "[REDACTED]",
        "auth": {"token": "[REDACTED]"},
    }
    assert "abcDEF1234567890" not in (call.error or "")
    assert "abcDEF1234567890" not in r.errors[0].error


def test_runs_by_outcome_and_why_they_failed(audit_engine: Engine) -> None:
    """R1 done, R2 and R3 failed (their model refused its key: no call); R0 before the window.
    Filters narrow runs as they narrow calls; the failures' text is redacted again."""
    runs = report(audit_engine).runs
    assert (runs.started, runs.done, runs.failed, runs.cancelled, runs.running) == (3, 1, 2, 0, 0)
    [why] = runs.errors
    assert (why.count, why.last_at) == (2, NOW - timedelta(hours=3))
    assert "refused the key (401)" in why.error and SECRET not in why.error
    day = report(audit_engine, "1d").runs  # R2 started 30 hours ago
    assert (day.started, day.failed, day.errors[0].count) == (1, 1, 1)
    bob, alice = report(audit_engine, user="U_BOB").runs, report(audit_engine, user="U_ALICE").runs
    assert (bob.started, bob.failed, alice.started, alice.done) == (2, 2, 1, 1)
    k8s = report(audit_engine, connector="k8s").runs  # runs that called k8s: R1 alone
    assert (k8s.started, k8s.done, k8s.failed, k8s.errors) == (1, 1, 0, [])
    elsewhere = report(audit_engine, platform="slack", channel="C_ELSEWHERE").runs
    assert (elsewhere.started, elsewhere.errors) == (0, [])
    month = report(audit_engine, "30d").runs  # R0 counts too: still running
    assert (month.started, month.running) == (4, 1)


def test_a_call_refused_to_a_process_that_lost_its_run_counts_as_blocked(
    audit_engine: Engine,
) -> None:
    """A `lost` row (the fenced start refused it: it never went out) is one more blocked call
    in the totals, its action and its requester, and `--outcome blocked` lists it."""
    with Session(audit_engine) as session:
        session.add(CallLog(
            at=NOW - timedelta(hours=1), run_id="R1", tool_call_id="call_lost",
            requester="U_ALICE", connector="k8s", action="restart", tool_name="k8s__restart",
            result_status="lost", error="not run: this process no longer holds the run",
        ))  # fmt: skip
        session.commit()
    t = report(audit_engine).totals
    assert (t.calls, t.blocked) == (12, 2)
    blocked = report(audit_engine, outcome="blocked")
    assert sorted(c.result_status for c in iter_calls(audit_engine, blocked.query)) == [
        "blocked",
        "lost",
    ]
