"""The call log as the console browses it: the audit's own query (now with an outcome filter),
newest first and paged, CSV identical to `chatops audit --format csv`, JSON of the same rows,
direct messages' details hidden, and a download abandoned halfway stops its worker (SQLite and
PostgreSQL, the seeded call log of tests/audit/conftest.py)."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from sqlalchemy import Engine
from sqlmodel import Session

from bot.audit.browse import CallLogBrowser
from bot.audit.render import csv_text
from bot.audit.report import iter_calls, recent_calls
from bot.chat.audit_report import AuditQuery
from bot.storage.database import Database
from bot.storage.models import CallLog
from tests.audit.conftest import CALLS, NOW, SECRET, at

pytestmark = pytest.mark.both_databases  # the call log's own query, filtered and paged

WIDE = {"since": NOW - timedelta(days=30), "until": NOW + timedelta(hours=1)}


def query(**filters) -> AuditQuery:
    return AuditQuery(**WIDE, max_calls=None, **filters)


def add_calls(engine: Engine, *rows: CallLog) -> None:
    with Session(engine) as session:
        session.add_all(rows)
        session.commit()


def test_recent_calls_are_newest_first_paged_and_filtered_by_outcome(audit_engine) -> None:
    everything = recent_calls(audit_engine, query(), limit=1000)
    assert len(everything) == len(CALLS)
    assert [c.id for c in everything] == sorted((c.id for c in everything), reverse=True)
    first = recent_calls(audit_engine, query(), limit=5)
    rest = recent_calls(audit_engine, query(), limit=1000, before_id=first[-1].id)
    assert [c.id for c in first + rest] == [c.id for c in everything]

    errors = recent_calls(audit_engine, query(outcome="error"), limit=1000)
    assert errors and {c.result_status for c in errors} == {"error"}
    assert len(errors) == sum(1 for row in CALLS if row[7] == "error")
    both = recent_calls(audit_engine, query(outcome="rejected", connector="pagerduty"), limit=99)
    assert {(c.connector, c.result_status) for c in both} == {("pagerduty", "rejected")}


def test_unknown_outcome_is_a_call_that_never_completed(audit_engine) -> None:
    add_calls(audit_engine, CallLog(at=at(1), connector="k8s", action="restart",
                                    requester="U_ALICE", result_status="started"))  # fmt: skip
    [unknown] = recent_calls(audit_engine, query(outcome="unknown"), limit=10)
    assert unknown.result_status == "started"
    assert "outcome unknown" in query(outcome="unknown").describe()


def test_direct_messages_keep_their_row_but_not_their_arguments(audit_engine) -> None:
    add_calls(audit_engine, CallLog(
        at=at(1), platform="slack", channel="D_ALICE", direct=True, requester="U_ALICE",
        connector="k8s", action="restart", mutating=True, arguments={"deployment": "payroll"},
        result_status="error", error="payroll is private",
    ))  # fmt: skip
    for entries in (
        recent_calls(audit_engine, query(hide_direct=True), limit=1),
        [c for c in iter_calls(audit_engine, query(hide_direct=True)) if c.channel == "D_ALICE"],
    ):
        [entry] = entries
        assert entry.arguments == {"(direct message)": "hidden"} and entry.error is None
    shown = recent_calls(audit_engine, query(), limit=1)[0]  # the operator's CLI sees it all
    assert shown.arguments == {"deployment": "payroll"}


async def test_exports_are_the_clis_csv_and_the_same_rows_as_json(
    audit_engine: Engine, audit_db: Database
) -> None:
    browser = CallLogBrowser(audit_db)
    filters = query(connector="k8s")
    csv_export = "".join([chunk async for chunk in browser.export(filters, "csv")])
    assert csv_export == csv_text(iter_calls(audit_engine, filters))  # `chatops audit` CSV
    json_export = "".join([chunk async for chunk in browser.export(filters, "json")])
    rows = json.loads(json_export)
    assert [r["id"] for r in rows] == [c.id for c in iter_calls(audit_engine, filters)]
    assert SECRET not in csv_export + json_export
    empty = "".join([c async for c in browser.export(query(connector="nothing"), "json")])
    assert json.loads(empty) == []


async def test_a_download_abandoned_halfway_stops_its_worker(
    audit_engine: Engine, audit_db: Database
) -> None:
    browser = CallLogBrowser(audit_db, depth=1)
    many = [CallLog(at=at(2), connector="bulk", action="x", requester=f"U{i}") for i in range(3000)]
    add_calls(audit_engine, *many)
    chunks = browser.export(query(connector="bulk"), "csv")
    first = await anext(chunks)
    assert first.startswith("id,at,")
    await chunks.aclose()  # the browser went away: the producer thread must end, not block
    again = "".join([c async for c in browser.export(query(connector="bulk"), "csv")])
    assert len(again.splitlines()) == 3001
