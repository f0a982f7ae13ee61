"""Real `chatops serve` processes on one PostgreSQL schema, reached through a TCP proxy the test
controls, behind FakeSlack, the fake model, the fake ops API and a stdio MCP server: the
deployment the faults (tests/faults/kinds.py) are injected into, shared by the tests and
bench/faults.py. Each conversation restarts its own service (`svc-<n>`), over HTTP
(`ops__restart`) or over MCP (`fleet__slow_restart`, when its text says "via mcp").
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import re
import signal
import sys
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from sqlalchemy import create_engine, make_url, text

from bot.surfaces.slack.cards import APPROVE_ACTION
from tests.fakes.mcp_server import __file__ as MCP_SERVER
from tests.fakes.openai_server import FakeOpenAI, Turn, answer, tool_call
from tests.fakes.ops_api import OpsAPI
from tests.fakes.serving import started
from tests.fakes.slack_api import FakeSlack
from tests.fakes.tcp_proxy import TcpProxy
from tests.faults.invariants import Conversation, Verdict, settle
from tests.server.serve_process import CHATOPS, ServeProcess, SlackSender, serve_env
from tests.slack.e2e import card_in, manifest, texts
from tests.slack.payloads import block_actions, mention

SERVICE = re.compile(r"\bsvc-\d+\b")
LEASE_S = 3.0  # a beat a second: a lapsed lease is noticed within a few seconds
LEAD, DEV = "U0LEAD", "U0DEV"


def model(body: dict[str, Any]) -> Turn:
    """The fake model: restart the service the user named (over MCP if they said so), then
    answer "<service> is back."."""
    users = [str(m.get("content") or "") for m in body["messages"] if m["role"] == "user"]
    found = SERVICE.findall(" ".join(users))
    service = found[-1] if found else "svc-?"
    if body.get("stream"):
        return answer(f"{service} is back.")
    if any(m["role"] == "tool" for m in body["messages"]):
        return answer(f"{service} is back.")
    if any("via mcp" in u for u in users):
        return tool_call(
            "fleet__slow_restart", {"service": service, "seconds": 2}, id=f"call_{service}"
        )
    return tool_call("ops__restart", {"name": service}, id=f"call_{service}")


class SlackThreads:
    """The invariants' view of FakeSlack."""

    def __init__(self, fake: FakeSlack) -> None:
        self.fake = fake

    def texts(self, thread: str) -> list[str]:
        return texts(self.fake, thread)

    def live_card(self, thread: str) -> bool:
        return card_in(self.fake, thread, pending=True) is not None


def pg_sql(admin_url: str, statement: str, **params: Any) -> list[Any]:
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            result = conn.execute(text(statement), params)
            return list(result) if result.returns_rows else []
    finally:
        admin.dispose()


@dataclass
class Cluster:
    """The deployment under test. `database_url` is the test's schema (direct, for reading);
    the processes reach it through `proxy`, each with its own `application_name`."""

    root: Path
    database_url: str
    admin_url: str
    slack: FakeSlack
    llm: FakeOpenAI
    ops: OpsAPI
    proxy: TcpProxy
    http: aiohttp.ClientSession
    processes: list[ServeProcess] = field(default_factory=list)
    conversations: list[Conversation] = field(default_factory=list)
    names: list[str] = field(default_factory=list)  # each process's application_name
    injected: Counter[str] = field(default_factory=Counter)
    lease_s: float = LEASE_S
    command: tuple[str, ...] = (CHATOPS,)  # what runs `serve` (a bench passes a launcher)
    extra_env: dict[str, str] = field(default_factory=dict)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    @property
    def sender(self) -> SlackSender:
        return SlackSender(self.http)

    @property
    def mcp_calls(self) -> Path:
        return self.root / "mcp-calls.txt"

    def env(self, index: int, **extra: str) -> dict[str, str]:
        manifests = self.root / "manifests"
        manifests.mkdir(exist_ok=True)
        (manifests / "ops.yaml").write_text(manifest(self.ops.url))
        command = [sys.executable, MCP_SERVER, "--calls", str(self.mcp_calls)]
        fleet = {"name": "fleet", "type": "mcp", "command": command, "timeout_s": 20}
        (manifests / "fleet.yaml").write_text(yaml.safe_dump(fleet))
        via_proxy = (
            make_url(self.database_url)
            .update_query_dict({"application_name": self.names[index]})
            .set(host="127.0.0.1", port=self.proxy.port)
        )
        return serve_env(
            database_url=via_proxy.render_as_string(hide_password=False), manifests=manifests,
            slack_url=self.slack.url, llm_url=self.llm.base_url, chatops_lease_s=str(self.lease_s),
            chatops_node_name=f"node-{index}", chatops_llm_timeout_s="3",
            # every conversation is one person's (DEV): the per-person caps are not the test
            chatops_max_active_runs_per_user="1000",
            chatops_max_pending_approvals_per_user="1000", **extra,
        ) | self.extra_env  # fmt: skip

    async def start(self, count: int) -> None:
        schema = re.search(r"search_path%3D(\w+)", self.database_url)
        tag = schema.group(1) if schema else "faults"
        self.names = [f"faults_{tag}_{i}" for i in range(count)]
        for index in range(count):
            process = ServeProcess(self.root, self.env(index), command=self.command)
            self.processes.append(process)
            await process.start()
        for process in self.processes:
            await process.wait_log("recovery done", 60)

    async def restart(self, index: int, **extra: str) -> None:
        """Restart process `index` (SIGTERM, as a deploy does) with `extra` settings (e.g. a
        skewed clock: LD_PRELOAD and FAKETIME for libfaketime), once it serves again."""
        gone = self.processes[index]
        await gone.stop()
        (self.root / f"process-{index}-pid{gone.pid}.log").write_text("".join(gone.log))
        process = ServeProcess(self.root, self.env(index) | extra, command=self.command)
        self.processes[index] = process
        await process.start()
        await process.wait_log("recovery done", 60)

    # conversations ------------------------------------------------------------------------

    async def mention(self, index: int, *, via_mcp: bool = False) -> Conversation | None:
        """A new thread on process `index`; kept (acknowledged) only if it answered 200. A
        refused one is sent again later, as Slack does, by `retry_refused`."""
        service = f"svc-{next(self._ids)}"
        how = " via mcp" if via_mcp else ""
        event = mention(f"restart {service}{how} please", user=DEV)
        conv = Conversation(service, event["event"]["ts"])
        for _ in range(20):  # Slack retries a refused event (three times, over minutes)
            if await self._send(index, event) == 200:
                self.conversations.append(conv)
                return conv
            await asyncio.sleep(0.5)
        return None

    async def _send(self, index: int, payload: Any) -> int:
        with contextlib.suppress(aiohttp.ClientError, TimeoutError):
            return await self.sender.send(self.processes[index % len(self.processes)], payload)
        return 0

    async def approve(self, conv: Conversation, *indexes: int) -> bool:
        """Click Approve on the card of `conv` on each process of `indexes` in turn (the same
        click, as when Slack delivers it twice; each retried while refused)."""
        payload = await self.approval(conv)
        sent = [await self.click(index, payload) for index in indexes]
        return all(sent)

    async def approval(self, conv: Conversation) -> dict[str, Any]:
        """The Approve click on the card of `conv` (to send later, or more than once)."""
        card = await self.slack.wait_for(lambda: card_in(self.slack, conv.thread), 30)
        return block_actions(card, APPROVE_ACTION, user=LEAD)

    async def click(self, index: int, payload: dict[str, Any]) -> bool:
        """Send a click to process `index`, again while it is refused."""
        for _ in range(20):
            if await self._send(index, payload) == 200:
                return True
            await asyncio.sleep(0.5)
        return False

    async def wait_card(self, conv: Conversation, within: float = 60) -> bool:
        """Wait until the conversation shows its pending card (True) or has already ended
        with an outcome, e.g. a run that failed under the fault (False)."""
        from tests.faults.invariants import outcomes

        def ready() -> bool | None:
            if card_in(self.slack, conv.thread, pending=True) is not None:
                return True
            return False if outcomes(texts(self.slack, conv.thread), conv.service) else None

        found = await self.slack.wait_for(lambda: (r := ready()) is not None and (r,), within)
        return found[0]

    def slack_texts(self, conv: Conversation) -> list[str]:
        return texts(self.slack, conv.thread)

    def executed(self) -> dict[str, int]:
        """Executions at the target systems, by service: the ops API's POSTs and the MCP
        server's recorded calls."""
        done = Counter(self.ops.restarts)
        if self.mcp_calls.exists():
            done.update(line.split()[0] for line in self.mcp_calls.read_text().splitlines())
        return dict(done)

    async def verdict(self, within: float = 60) -> Verdict:
        return await settle(
            self.database_url, self.conversations, SlackThreads(self.slack), self.executed,
            within=within,
        )  # fmt: skip

    # database access the faults use -------------------------------------------------------

    def terminate_backends(self, index: int | None = None) -> int:
        """`pg_terminate_backend` of this cluster's own sessions only (by application_name)."""
        names = self.names if index is None else [self.names[index]]
        found = pg_sql(
            self.admin_url,
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE application_name = ANY(:names) AND pid <> pg_backend_pid()",
            names=names,
        )
        return len(found)

    @asynccontextmanager
    async def heartbeat_stalled(self, index: int) -> AsyncIterator[None]:
        """Process `index`'s heartbeat blocks while the block runs: its `bot_process` row is
        held `FOR UPDATE` in an open transaction (the process itself goes on serving)."""
        engine = create_engine(self.database_url)
        row = f"node-{index}:{self.processes[index].pid}:%"
        try:
            with engine.connect() as conn:
                locked = await asyncio.to_thread(
                    lambda: conn.execute(
                        text("SELECT id FROM bot_process WHERE id LIKE :row FOR UPDATE"),
                        {"row": row},
                    ).all()
                )
                assert locked, f"process {index} has no bot_process row"
                try:
                    yield
                finally:
                    await asyncio.to_thread(conn.rollback)
        finally:
            await asyncio.to_thread(engine.dispose)

    def signal(self, index: int, sig: signal.Signals) -> None:
        os.kill(self.processes[index].pid, sig)

    def logs(self) -> str:
        """What each process said (whole logs in `root`), and the runs: for a failure's reader."""
        from tests.faults.invariants import read_rows

        runs, calls = read_rows(self.database_url)
        said = [f"run {r.id[:8]} {r.status} owner={r.owner} query={r.query!r}" for r in runs]
        said += [f"call {c.run_id[:8]} {c.tool_call_id} {c.result_status}" for c in calls]
        for index, process in enumerate(self.processes):
            (self.root / f"process-{index}.log").write_text("".join(process.log))
            lines = [line for line in process.log if line[:4].isdigit()]  # no tracebacks
            lines = [line for line in lines if "HTTP Request" not in line]
            said.append(f"--- process {index} (pid {process.pid}) ---\n" + "".join(lines[-60:]))
        return "\n".join(said)


@asynccontextmanager
async def cluster(
    root: Path, database_url: str, admin_url: str, *, processes: int = 2,
    lease_s: float = LEASE_S, command: tuple[str, ...] = (CHATOPS,),
    extra_env: dict[str, str] | None = None,
) -> AsyncIterator[Cluster]:  # fmt: skip
    """Fakes, the proxy and `processes` serve processes (`lease_s`: their runs' lease);
    everything stopped afterwards (a paused process is woken first, so it can be killed)."""
    async with AsyncExitStack() as stack:
        slack = await stack.enter_async_context(started(FakeSlack()))
        llm = await stack.enter_async_context(started(FakeOpenAI()))
        ops = await stack.enter_async_context(started(OpsAPI()))
        server = make_url(database_url)
        proxy = TcpProxy(server.host or "127.0.0.1", server.port or 5432)
        proxy = await stack.enter_async_context(started(proxy))
        http = await stack.enter_async_context(aiohttp.ClientSession())
        llm.respond_with(model)
        deployment = Cluster(root, database_url, admin_url, slack, llm, ops, proxy, http)
        deployment.lease_s, deployment.command = lease_s, command
        deployment.extra_env = dict(extra_env or {})
        try:
            await deployment.start(processes)
            yield deployment
        except BaseException:
            print(deployment.logs())
            raise
        finally:
            for process in deployment.processes:
                if process._proc is not None and process._proc.returncode is None:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(process.pid, signal.SIGCONT)
                    await process.kill()
