"""bench/scale.py's set-ups: the fakes, a private PostgreSQL schema, and N `chatops serve`
processes on one database, plus the small measuring tools the phases share.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import create_engine, text

from tests.fakes.openai_server import FakeOpenAI, Turn, answer, tool_call
from tests.fakes.ops_api import OpsAPI, ops_manifest
from tests.fakes.serving import started
from tests.fakes.slack_api import FakeSlack
from tests.server.serve_process import ServeProcess, serve_env

LAUNCHER = Path(__file__).with_name("_scale_serve.py")
POSTGRES_URL = os.environ.get(
    "CHATOPS_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
BUDGET_ENV = "BENCH_SLACK_BUDGET"  # read by _scale_serve.py (not imported here: it loads the bot)
RESTART = re.compile(r"restart (svc\d+)")
LAG_POLL_S = 1.0  # how often the phases read /healthz (its window is 10 s: nothing is missed)
STATEMENTS = "chatops_db_statements_total"  # by kind: select, insert, update, delete, other
PLATFORM_CALLS = "chatops_platform_api_calls_total"  # by platform and method
ACTIVE_RUNS = "chatops_active_runs"
IDLE_TIMEOUT_S = 10.0  # a run's last writes after its status showed Done


def percentile(values: list[float], q: float) -> float:
    """Nearest rank, as the other benches take it; NaN for no values (printed `nan`)."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system) the process has used so far (/proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def model(body: dict[str, Any]) -> Turn:
    """The fake model: `restart svcN` asks for ops__restart of svcN (which needs approval),
    anything else is answered at once; the synthesis (streamed) is one short sentence."""
    if body.get("stream"):
        return answer("All quiet.")
    messages = body["messages"]
    if any(m["role"] == "tool" for m in messages):
        return answer("restarted")
    asked = next(str(m.get("content") or "") for m in reversed(messages) if m["role"] == "user")
    if match := RESTART.search(asked):
        return tool_call("ops__restart", {"name": match.group(1)}, id=f"call_{match.group(1)}")
    return answer("nothing to do")


def _schema_sql(statement: str) -> None:
    admin = create_engine(POSTGRES_URL, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(statement))
    finally:
        admin.dispose()


@contextlib.asynccontextmanager
async def postgres_schema(name: str) -> AsyncIterator[str]:
    """A private schema in the shared database, dropped afterwards (as tests/conftest.py
    does): the bench never touches anyone else's tables. Yields the URL that uses it. The
    SQL runs in a thread: this process's loop times the servers meanwhile."""
    await asyncio.to_thread(_schema_sql, f'CREATE SCHEMA "{name}"')
    try:
        sep = "&" if "?" in POSTGRES_URL else "?"
        yield f"{POSTGRES_URL}{sep}options=-csearch_path%3D{name}"
    finally:
        await asyncio.to_thread(_schema_sql, f'DROP SCHEMA "{name}" CASCADE')


@dataclass
class Cluster:
    """One set-up: the fakes (in this process) and its serve processes (one database)."""

    name: str
    slack: FakeSlack
    llm: FakeOpenAI
    ops: OpsAPI
    servers: list[ServeProcess] = field(default_factory=list)


@contextlib.asynccontextmanager
async def cluster(
    name: str, *, processes: int, postgres: bool, think_s: float, env: dict[str, str]
) -> AsyncIterator[Cluster]:
    """Start the fakes and `processes` serve processes (one after the other: the first one
    migrates the database), all stopped (SIGTERM) and the database dropped afterwards."""
    async with (
        started(FakeSlack()) as slack,
        started(FakeOpenAI(think_s=think_s)) as llm,
        started(OpsAPI()) as ops,
    ):
        llm.respond_with(model)
        with tempfile.TemporaryDirectory() as tmp:
            async with contextlib.AsyncExitStack() as stack:
                manifests = Path(tmp) / "manifests"
                manifests.mkdir()
                (manifests / "ops.yaml").write_text(ops_manifest(ops.url))
                if postgres:
                    schema = f"bench_scale_{os.getpid()}_{uuid.uuid4().hex[:6]}"
                    url = await stack.enter_async_context(postgres_schema(schema))
                else:
                    url = f"sqlite:///{Path(tmp) / 'scale.db'}"
                process_env = serve_env(
                    database_url=url, manifests=manifests, slack_url=slack.url,
                    llm_url=llm.base_url, **{BUDGET_ENV: "lifted", **env},
                )  # fmt: skip
                found = Cluster(name, slack, llm, ops)
                try:
                    for _ in range(processes):
                        server = ServeProcess(
                            Path(tmp), process_env, command=(sys.executable, str(LAUNCHER))
                        )
                        found.servers.append(server)
                        await server.start()
                    yield found
                finally:
                    for server in found.servers:
                        with contextlib.suppress(Exception):
                            await server.stop()


async def read_counters(
    http: aiohttp.ClientSession, servers: list[ServeProcess]
) -> dict[str, float]:
    """The serve processes' own counts from `/metrics`, summed over them: `db_<kind>` per
    statement kind, `platform_calls` (every method), `platform_<method>` and `active_runs`.
    A scrape reads two gauges from the database first: those statements are in the reading
    it returns."""
    totals: dict[str, float] = {}

    async def one(server: ServeProcess) -> None:
        async with http.get(f"{server.url}/metrics", timeout=aiohttp.ClientTimeout(30)) as r:
            r.raise_for_status()
            scraped = await r.text()
        for family in text_string_to_metric_families(scraped):
            for sample in family.samples:
                if sample.name == STATEMENTS:
                    key = f"db_{sample.labels['kind']}"
                elif sample.name == PLATFORM_CALLS:
                    method = f"platform_{sample.labels.get('method', '')}"
                    totals[method] = totals.get(method, 0.0) + sample.value
                    key = "platform_calls"
                elif sample.name == ACTIVE_RUNS:
                    key = "active_runs"
                else:
                    continue
                totals[key] = totals.get(key, 0.0) + sample.value

    await asyncio.gather(*(one(s) for s in servers))
    return totals


async def counters_when_idle(
    http: aiohttp.ClientSession, servers: list[ServeProcess]
) -> dict[str, float]:
    """`read_counters` once no server has a run active (a run still writes its ending after
    its status shows Done), or after `IDLE_TIMEOUT_S`."""
    deadline = time.monotonic() + IDLE_TIMEOUT_S
    while True:
        totals = await read_counters(http, servers)
        if not totals.get("active_runs") or time.monotonic() > deadline:
            return totals
        await asyncio.sleep(0.2)  # polling the servers' gauge: nothing to wait on here


class LagPoller:
    """Reads every server's `/healthz` each `LAG_POLL_S` while a phase runs; the worst p99
    and max of the 10-second windows it saw are the phase's event-loop lag."""

    def __init__(self, servers: list[ServeProcess]) -> None:
        self.servers = servers
        self.windows: list[dict[str, float]] = []
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> LagPoller:
        self._task = asyncio.create_task(self._poll())
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._stop.set()
        if self._task is not None:
            await self._task

    async def _poll(self) -> None:
        async with aiohttp.ClientSession() as http:
            while not self._stop.is_set():  # until the phase ends
                await asyncio.gather(*(self._read(http, s) for s in self.servers))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), LAG_POLL_S)
            await asyncio.gather(*(self._read(http, s) for s in self.servers))  # the last stretch

    async def _read(self, http: aiohttp.ClientSession, server: ServeProcess) -> None:
        with contextlib.suppress(aiohttp.ClientError, TimeoutError):
            async with http.get(f"{server.url}/healthz", timeout=aiohttp.ClientTimeout(10)) as r:
                self.windows.append((await r.json())["loop_lag_ms"])

    async def once(self, http: aiohttp.ClientSession) -> dict[str, float]:
        """One reading of the first server's window now ({} if it did not answer)."""
        await self._read(http, self.servers[0])
        return self.windows[-1] if self.windows else {}

    def worst(self, key: str) -> float:
        return max((w[key] for w in self.windows if w["samples"]), default=float("nan"))
