"""Bench: a 30-day audit report over a 1,000,000-row call log in SQLite.

Builds the call log in a temporary SQLite file (schema by the real migrations up to the one
before the audit indexes, rows by executemany in batches, spread over 60 days, several
connectors, users and outcomes), times the last migration (it builds the audit indexes on the
filled log, as an existing deployment's first start does), then times `build_report` for the
last 30 days and measures its peak Python memory (tracemalloc), and `chatops audit --since 30d
--out FILE` through the CLI's entry point (`bot.cli.main`: the report with its default cap of
listed calls, rendered and written). `--baseline` also times the CLI listing every mutating
call of the window (`--limit` above their count), as it did before the cap: tens of seconds.

    .venv/bin/python bench/audit_report.py [--rows N] [--baseline]
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import tempfile
import time
import tracemalloc
from datetime import timedelta
from pathlib import Path

from alembic import command

from bot.audit.render import markdown
from bot.audit.report import AuditQuery, build_report
from bot.cli import main as chatops
from bot.clock import utcnow
from bot.storage.database import create_db_engine, init_schema
from bot.storage.migrate import alembic_config

BEFORE_AUDIT_INDEXES = "0013_auditruns_run_index"  # 0014 builds the audit indexes
CONNECTORS = {
    "pagerduty": ["list_incidents", "acknowledge", "resolve"],
    "k8s": ["get_pods", "restart", "scale", "logs"],
    "github": ["list_prs", "merge", "create_issue"],
    "grafana": ["query", "annotate"],
}
MUTATING = {"acknowledge", "resolve", "restart", "scale", "merge", "create_issue", "annotate"}
USERS = 40
BATCH = 100_000
SPAN_DAYS = 60
# One bulk INSERT ... SELECT per batch: SQLite generates the rows itself (a recursive CTE over
# the row numbers), so a million rows take seconds, not a minute of Python tuple building.
# Timestamps use SQLAlchemy's SQLite format (microseconds) so window comparisons match.
# `draw` is MATERIALIZED: each row's random draws are made once (inlined, SQLite re-drew them
# at every use, so one batch's rows could all land on one action).
INSERT_BATCH = """
INSERT INTO call_log (
    at, conversation_id, run_id, tool_call_id, platform, channel, requester, connector, action,
    tool_name, mutating, arguments, fingerprint, approval_id, approval_status, approvers,
    result_status, observation, duration_ms, error)
WITH RECURSIVE seq(i) AS (SELECT :start UNION ALL SELECT i + 1 FROM seq WHERE i < :stop - 1),
draw AS MATERIALIZED (
    SELECT i, abs(random()) % :n_actions AS a, abs(random()) % 100 AS s,
           abs(random()) % :n_users AS u, abs(random()) % 4 AS e, abs(random()) % 3 AS p,
           abs(random()) % 5000 AS d
    FROM seq),
row AS (
    SELECT draw.*, bench_action.connector, bench_action.action, bench_action.mutating,
           CASE WHEN s < 85 THEN 'ok' WHEN s < 93 THEN 'error' WHEN s < 96 THEN 'blocked'
                WHEN s < 98 THEN 'rejected' ELSE 'expired' END AS status
    FROM draw JOIN bench_action ON bench_action.idx = draw.a)
SELECT
    strftime('%Y-%m-%d %H:%M:%f', :t0 + i * :step) || '000',
    i / 5, printf('run%08d', i / 5), printf('call%08d', i), 'slack', 'C_OPS', printf('U%04d', u),
    connector, action, connector || '__' || action, mutating,
    '{"id": "obj-' || (i % 997) || '", "token": "[REDACTED]"}', 'fp' || (i % 5000), NULL,
    CASE WHEN status IN ('rejected', 'expired') THEN status
         WHEN mutating AND status != 'blocked' THEN 'approved' ELSE 'not_required' END,
    CASE WHEN mutating AND status NOT IN ('blocked', 'expired')
         THEN '["U_LEAD' || p || '"]' ELSE '[]' END,
    status, '',
    CASE WHEN status IN ('ok', 'error') THEN d / 10.0 + 1 ELSE 0.0 END,
    CASE WHEN status = 'error' THEN
        CASE e WHEN 0 THEN 'HTTP 503' WHEN 1 THEN 'HTTP 404: not found'
               WHEN 2 THEN 'timeout after 10s' ELSE 'HTTP 429: rate limited' END END
FROM row
"""


def build_call_log(path: Path, rows: int) -> float:
    """Fill call_log with `rows` rows over the last 60 days; returns the seconds it took."""
    started = time.monotonic()
    engine = create_db_engine(f"sqlite:///{path}")
    with engine.begin() as conn:  # the audit indexes come after the rows (`main`)
        command.upgrade(alembic_config(conn), BEFORE_AUDIT_INDEXES)
    engine.dispose()
    actions = [(c, a, a in MUTATING) for c, names in CONNECTORS.items() for a in names]
    now = utcnow()
    # julian day of (now - 60 days); SQLite's strftime takes a julian day number
    t0 = (now - timedelta(days=SPAN_DAYS)).timestamp() / 86400.0 + 2440587.5
    step = SPAN_DAYS / rows
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=OFF")  # throwaway data: no rollback journal while loading
    conn.execute("PRAGMA synchronous=OFF")
    conn.execute("PRAGMA cache_size=-200000")
    conn.execute(
        "CREATE TEMP TABLE bench_action (idx INTEGER PRIMARY KEY, connector, action, mutating)"
    )
    conn.executemany(
        "INSERT INTO bench_action VALUES (?, ?, ?, ?)",
        [(i, c, a, int(m)) for i, (c, a, m) in enumerate(actions)],
    )
    for start in range(0, rows, BATCH):
        params = {
            "start": start,
            "stop": min(start + BATCH, rows),
            "n_actions": len(actions),
            "n_users": USERS,
            "t0": t0,
            "step": step,
        }
        conn.execute(INSERT_BATCH, params)
        conn.commit()
    conn.execute("PRAGMA journal_mode=WAL")  # back to what the bot uses
    conn.close()
    return time.monotonic() - started


def time_cli(database: Path, out: Path, *argv: str) -> tuple[float, float]:
    """Wall and CPU seconds of `chatops audit --since 30d --out OUT ARGV` on `database`."""
    os.environ["DATABASE_URL"] = f"sqlite:///{database}"
    started, cpu_started = time.monotonic(), time.process_time()
    status = chatops(["audit", "--since", "30d", "--out", str(out), *argv])
    elapsed, cpu = time.monotonic() - started, time.process_time() - cpu_started
    if status != 0:
        raise SystemExit(f"chatops audit exited {status}")
    return elapsed, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument(
        "--baseline", action="store_true", help="also time listing every mutating call"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "audit-bench.db"
        build_s = build_call_log(path, args.rows)
        engine = create_db_engine(f"sqlite:///{path}")
        started = time.monotonic()
        with engine.connect() as conn:  # index builds sort in memory (the pool reuses this)
            conn.exec_driver_sql("PRAGMA temp_store=MEMORY")
            conn.exec_driver_sql("PRAGMA cache_size=-300000")
        init_schema(engine)  # the audit indexes' migration, as the bot runs it at start-up
        index_s = time.monotonic() - started
        with engine.connect() as conn:  # warm the page cache like a running bot would
            conn.exec_driver_sql("SELECT count(*) FROM call_log").scalar_one()
        query = AuditQuery.window("30d")
        tracemalloc.start()
        started, cpu_started = time.monotonic(), time.process_time()
        report = build_report(engine, query)
        elapsed = time.monotonic() - started
        cpu = time.process_time() - cpu_started
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        rendered = markdown(report)
        engine.dispose()
        out = Path(tmp) / "report.md"
        cli_s, cli_cpu = time_cli(path, out)
        cli_size = out.stat().st_size
        if args.baseline:
            every = str(report.totals.mutating + 1)
            all_s, all_cpu = time_cli(path, out, "--limit", every)
            all_size = out.stat().st_size
    print(f"bench: audit_build_rows = {args.rows} rows")
    print(f"bench: audit_build_seconds = {build_s:.1f} s")
    print(f"bench: audit_index_seconds = {index_s:.1f} s")
    print(f"bench: audit_report_window_calls = {report.totals.calls} calls")
    print(f"bench: audit_report_30d_seconds = {elapsed:.3f} s")
    # CPU time of this process: the same work measured apart from other load on the machine
    print(f"bench: audit_report_30d_cpu_seconds = {cpu:.3f} s")
    print(f"bench: audit_report_peak_memory = {peak / 1e6:.1f} MB")
    print(f"bench: audit_report_markdown_size = {len(rendered) / 1e3:.1f} KB")
    print(f"bench: audit_cli_30d_seconds = {cli_s:.3f} s")
    print(f"bench: audit_cli_30d_cpu_seconds = {cli_cpu:.3f} s")
    print(f"bench: audit_cli_30d_file_size = {cli_size / 1e3:.1f} KB")
    if args.baseline:
        print(f"bench: audit_cli_30d_every_call_seconds = {all_s:.3f} s")
        print(f"bench: audit_cli_30d_every_call_cpu_seconds = {all_cpu:.3f} s")
        print(f"bench: audit_cli_30d_every_call_file_size = {all_size / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
