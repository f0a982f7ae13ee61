"""Fenced leases through real `chatops serve` processes on PostgreSQL: a run's owner A is alive
(or paused, or its heartbeat stalled) while B might take its run; clicks on the run's card
reach both processes. The approved tool runs exactly once: one request at the ops API, one
`started` call-log row for the (run, tool call)."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
import pytest
from sqlalchemy import create_engine, text

from bot.storage.models import CallLog, Run
from bot.surfaces.slack.cards import APPROVE_ACTION
from tests.databases import rows
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.ops_api import OpsAPI, restart_then_answer
from tests.fakes.slack_api import FakeSlack
from tests.faults.kinds import FAKETIME
from tests.server.serve_process import ServeProcess, SlackSender, serve_env, serving
from tests.server.test_processes import answered, card_recorded, root_of, runs_ended
from tests.slack.e2e import manifest, wait_card
from tests.slack.payloads import block_actions, mention

pytestmark = pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)


def env_of(
    tmp_path: Path, database_url: str, ops: OpsAPI, slack: FakeSlack, llm: FakeOpenAI,
    *, node: str, lease_s: str, skew: str = "",
) -> dict[str, str]:  # fmt: skip
    """A process on its own host (`node`: only the lease tells whether it is gone); `skew`: a
    libfaketime offset of its wall clock (e.g. "+60s")."""
    manifests = tmp_path / "manifests"
    manifests.mkdir(exist_ok=True)
    (manifests / "ops.yaml").write_text(manifest(ops.url))
    env = serve_env(
        database_url=database_url, manifests=manifests, slack_url=slack.url,
        llm_url=llm.base_url, chatops_lease_s=lease_s, chatops_node_name=node,
    )  # fmt: skip
    if skew:
        env |= {"LD_PRELOAD": str(FAKETIME), "FAKETIME": skew, "FAKETIME_DONT_FAKE_MONOTONIC": "1"}
    return env


async def run_waiting_on(
    a: ServeProcess, slack: SlackSender, fake: FakeSlack, database_url: str
) -> tuple[str, dict]:  # type: ignore[type-arg]
    """A's run of "restart api" waiting for its approval: (thread root, card)."""
    event = mention("restart api", user="U0DEV")
    root = root_of(event)
    assert await slack.send(a, event) == 200
    card = await wait_card(fake, root, pending=True)
    await card_recorded(database_url)
    return root, card


def ran_once(database_url: str, ops: OpsAPI) -> None:
    """One request reached the ops API; one call-log row went out for it, and it is `ok`
    (a start refused to a process that had lost the run is logged `lost`: it never went out)."""
    assert ops.restarts == ["api"]
    logged = [c for c in rows(database_url, CallLog) if c.tool_name == "ops__restart"]
    went_out = [(c.tool_call_id, c.result_status) for c in logged if c.result_status != "lost"]
    assert went_out == [("call_restart", "ok")]


async def finished(fake: FakeSlack, database_url: str, root: str) -> None:
    await answered(fake, root)
    await runs_ended(database_url, 1)
    assert [r.status for r in rows(database_url, Run)] == ["done"]


@pytest.mark.skipif(not FAKETIME.exists(), reason=f"clock skew needs libfaketime at {FAKETIME}")
async def test_a_process_whose_clock_runs_ahead_does_not_take_a_live_run(
    tmp_path: Path, database_url: str, ops_api: OpsAPI, fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
) -> None:  # fmt: skip
    """B's wall clock is 60 s ahead of A's and the database's: A's live lease (30 s) is still
    live to B, so B adopts nothing; the card is approved on A and on B: the tool runs once."""
    fake_openai.respond_with(restart_then_answer)
    env_a = env_of(tmp_path, database_url, ops_api, fake_slack, fake_openai, node="a", lease_s="30")
    env_b = env_of(
        tmp_path, database_url, ops_api, fake_slack, fake_openai, node="b", lease_s="30",
        skew="+60s",
    )  # fmt: skip
    async with aiohttp.ClientSession() as http, serving(tmp_path, env_a) as a:
        slack = SlackSender(http)
        await a.wait_log("recovery done")
        root, card = await run_waiting_on(a, slack, fake_slack, database_url)
        async with serving(tmp_path, env_b) as b:
            await b.wait_log("recovery done")  # start-up recovery has looked at A's run
            [run] = rows(database_url, Run)
            assert run.owner is not None and run.owner.startswith("a:"), run.owner
            clicks = [
                slack.click(a, card, APPROVE_ACTION, user="U0LEAD"),
                slack.click(b, card, APPROVE_ACTION, user="U0LEAD"),
            ]
            assert await asyncio.gather(*clicks) == [200, 200]
            await finished(fake_slack, database_url, root)
            assert not any("adopted run" in line for line in b.log)
    ran_once(database_url, ops_api)


@asynccontextmanager
async def two_nodes(
    tmp_path: Path, database_url: str, ops: OpsAPI, slack: FakeSlack, llm: FakeOpenAI
) -> AsyncIterator[tuple[SlackSender, ServeProcess, ServeProcess]]:
    """Processes A and B on hosts of their own with 3 s leases, both past start-up recovery
    (their logs printed if the block fails)."""
    env_a = env_of(tmp_path, database_url, ops, slack, llm, node="a", lease_s="3")
    env_b = env_of(tmp_path, database_url, ops, slack, llm, node="b", lease_s="3")
    async with (
        aiohttp.ClientSession() as http,
        serving(tmp_path, env_a) as a,
        serving(tmp_path, env_b) as b,
    ):
        await a.wait_log("recovery done")
        await b.wait_log("recovery done")
        yield SlackSender(http), a, b


@asynccontextmanager
async def row_locked(database_url: str, table: str, row_id: str) -> AsyncIterator[None]:
    """Hold a row lock (SELECT ... FOR UPDATE in an open transaction) until the block ends."""
    engine = create_engine(database_url)
    try:
        with engine.connect() as conn:
            conn.execute(text(f"SELECT id FROM {table} WHERE id = :id FOR UPDATE"), {"id": row_id})
            try:
                yield
            finally:
                conn.rollback()
    finally:
        engine.dispose()


async def test_a_stalled_heartbeat_loses_the_run_and_a_click_on_it_runs_nothing(
    tmp_path: Path, database_url: str, ops_api: OpsAPI, fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
) -> None:  # fmt: skip
    """A's heartbeat blocks on its locked process row while A goes on serving HTTP; its lease
    lapses and B adopts the run. The approval reaches A first: A does not run the tool (it says
    it lost the run), B runs it; a second click on B changes nothing."""
    fake_openai.respond_with(restart_then_answer)
    nodes = two_nodes(tmp_path, database_url, ops_api, fake_slack, fake_openai)
    async with nodes as (slack, a, b):
        root, card = await run_waiting_on(a, slack, fake_slack, database_url)
        [run] = rows(database_url, Run)
        assert run.owner is not None
        again = block_actions(card, APPROVE_ACTION, user="U0LEAD")  # (the card changes after)
        async with row_locked(database_url, "bot_process", run.owner):
            await b.wait_log("adopted run", 30)  # A's lease lapsed: its beat cannot renew it
            async with slack.http.get(f"{a.url}/healthz") as response:  # A still serves
                assert response.status in (200, 503)
            assert await slack.click(a, card, APPROVE_ACTION, user="U0LEAD") == 200
            lost = await a.wait_log(f"run {run.id}: tool call", 30)
            assert "WARNING" in lost and "another process holds its lease" in lost
            await finished(fake_slack, database_url, root)
            assert await slack.send(b, again) == 200
    ran_once(database_url, ops_api)
    [refused] = [c for c in rows(database_url, CallLog) if c.result_status == "lost"]
    assert refused.tool_call_id == "call_restart" and "another process" in refused.error


async def test_an_owner_paused_past_its_lease_drops_the_run_when_it_wakes(
    tmp_path: Path, database_url: str, ops_api: OpsAPI, fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
) -> None:  # fmt: skip
    """A is stopped (SIGSTOP) with its run waiting for approval; B adopts it once A's lease
    lapsed; a click on the card waits in A's socket, A continues (SIGCONT) and the card is
    approved on B too: the tool runs once (A's wake-up heartbeat or its fenced start stops it)."""
    fake_openai.respond_with(restart_then_answer)
    nodes = two_nodes(tmp_path, database_url, ops_api, fake_slack, fake_openai)
    async with nodes as (slack, a, b):
        root, card = await run_waiting_on(a, slack, fake_slack, database_url)
        os.kill(a.pid, signal.SIGSTOP)
        try:
            await b.wait_log("adopted run", 30)
            # the click reaches A while it is still stopped: the first thing it reads on waking
            on_a = asyncio.create_task(slack.click(a, card, APPROVE_ACTION, user="U0LEAD"))
            await asyncio.sleep(0.5)
        finally:
            os.kill(a.pid, signal.SIGCONT)
        on_b = slack.click(b, card, APPROVE_ACTION, user="U0LEAD")
        assert await asyncio.gather(on_a, on_b) == [200, 200]
        await finished(fake_slack, database_url, root)
    ran_once(database_url, ops_api)
