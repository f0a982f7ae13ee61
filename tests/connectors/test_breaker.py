"""A connector's circuit breaker, through the tools a manifest compiles to (`ConnectorSet.load`)
against a local fake API: which failures count, the cool-down, the half-open trial."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp

from bot.clock import ManualClock
from bot.engine.tools import ToolResult
from connectors.breaker import Breakers, BreakerSettings, BreakerState
from connectors.connector_set import ConnectorSet
from tests.connectors.conftest import http_manifest, write_manifest
from tests.fakes.http_api import FakeHttpApi

PATH = "/v1/items"


async def loaded(
    tmp_path: Path, http: aiohttp.ClientSession, api: FakeHttpApi, *, threshold: int = 2
) -> tuple[ConnectorSet, ManualClock]:
    clock = ManualClock()
    action = {"name": "items", "description": "list items", "method": "GET", "path": "/items"}
    manifest = http_manifest(api.url + "/v1", action, retries=0)
    write_manifest(tmp_path / "m", manifest)
    breakers = Breakers(BreakerSettings(threshold=threshold, cooldown_s=30), clock)
    connectors = await ConnectorSet.load(tmp_path / "m", http=http, environ={}, breakers=breakers)
    return connectors, clock


async def call(connectors: ConnectorSet, args: dict[str, Any] | None = None) -> ToolResult:
    [name] = connectors.tools.names()
    tool = connectors.tools.get(name)
    assert tool is not None
    return await tool.invoke(args or {})


async def test_5xx_and_dropped_connections_open_it_4xx_and_bad_arguments_do_not(
    tmp_path: Path, http: aiohttp.ClientSession, fake_api: FakeHttpApi
) -> None:
    connectors, _ = await loaded(tmp_path, http, fake_api)
    breaker = connectors.breakers.of("api")
    fake_api.fail_next("GET", PATH, status=404, count=3)
    for _ in range(3):
        assert "HTTP 404" in (await call(connectors)).content
    assert (await call(connectors, {"nope": 1})).is_error  # refused before sending
    assert breaker.state is BreakerState.CLOSED and breaker.errors == 0

    fake_api.fail_next("GET", PATH, status=502)
    fake_api.disconnect_next("GET", PATH, count=2)  # aiohttp repeats once on a reused connection
    assert "HTTP 502" in (await call(connectors)).content
    assert breaker.state is BreakerState.CLOSED and breaker.errors == 1
    assert "request failed" in (await call(connectors)).content
    assert breaker.state is BreakerState.OPEN and breaker.errors == 2

    sent = len(fake_api.calls(PATH))
    refused = await call(connectors)
    assert refused.is_error
    assert refused.content.startswith("connector api is failing: 2 errors in a row; calls resume")
    assert len(fake_api.calls(PATH)) == sent  # failed fast: nothing sent
    assert [b.connector for b in connectors.breakers.tripped()] == ["api"]


async def test_a_success_between_failures_resets_the_count(
    tmp_path: Path, http: aiohttp.ClientSession, fake_api: FakeHttpApi
) -> None:
    connectors, _ = await loaded(tmp_path, http, fake_api)
    fake_api.fail_next("GET", PATH, status=503)
    await call(connectors)
    assert not (await call(connectors)).is_error  # the fake echoes: a success
    fake_api.fail_next("GET", PATH, status=503)
    await call(connectors)
    assert connectors.breakers.of("api").state is BreakerState.CLOSED


async def test_a_failed_trial_opens_it_again_and_one_trial_runs_at_a_time(
    tmp_path: Path, http: aiohttp.ClientSession, fake_api: FakeHttpApi
) -> None:
    connectors, clock = await loaded(tmp_path, http, fake_api)
    breaker = connectors.breakers.of("api")
    fake_api.fail_next("GET", PATH, status=500, count=3)
    await call(connectors)
    await call(connectors)
    assert breaker.state is BreakerState.OPEN
    first_resume = breaker.resumes_at
    clock.advance(29)
    assert "is failing" in (await call(connectors)).content  # still cooling down
    clock.advance(2)
    assert "HTTP 500" in (await call(connectors)).content  # the trial went through, and failed
    assert breaker.state is BreakerState.OPEN and breaker.errors == 3
    assert breaker.resumes_at is not None and first_resume is not None
    assert breaker.resumes_at > first_resume  # a new cool-down from the failed trial

    clock.advance(31)
    fake_api.hang_next("GET", PATH)
    trial = asyncio.create_task(call(connectors))
    await fake_api.wait_for(lambda: len(fake_api.calls(PATH)) == 4)
    assert breaker.state is BreakerState.HALF_OPEN
    meanwhile = await call(connectors)
    assert "a trial call is under way" in meanwhile.content
    assert len(fake_api.calls(PATH)) == 4
    trial.cancel()
    await asyncio.gather(trial, return_exceptions=True)
    # a cancelled trial gives no verdict: the next call is the trial, and it succeeds
    assert not (await call(connectors)).is_error
    assert breaker.state is BreakerState.CLOSED and breaker.errors == 0
    assert connectors.breakers.tripped() == []


async def test_threshold_zero_never_opens(
    tmp_path: Path, http: aiohttp.ClientSession, fake_api: FakeHttpApi
) -> None:
    connectors, _ = await loaded(tmp_path, http, fake_api, threshold=0)
    fake_api.fail_next("GET", PATH, status=503, count=5)
    for _ in range(5):
        assert "HTTP 503" in (await call(connectors)).content
    assert len(fake_api.calls(PATH)) == 5
    assert connectors.breakers.tripped() == []


async def test_an_mcp_server_that_keeps_crashing_opens_it_a_tool_error_does_not(
    tmp_path: Path, http: aiohttp.ClientSession
) -> None:
    from tests.connectors.test_mcp import TOKEN, stdio_manifest

    write_manifest(tmp_path / "m", stdio_manifest())
    clock = ManualClock()
    breakers = Breakers(BreakerSettings(threshold=2, cooldown_s=30), clock)
    environ = {"CHATOPS_TEST_MCP_TOKEN": TOKEN}
    async with await ConnectorSet.load(
        tmp_path / "m", http=http, environ=environ, breakers=breakers
    ) as connectors:
        tools = connectors.tools
        breaker = breakers.of("fake")
        failed = await tools.get("fake__fail").invoke({})  # type: ignore[union-attr]
        assert failed.is_error and breaker.errors == 0  # the tool's own error answer
        for _ in range(2):
            crashed = await tools.get("fake__crash").invoke({})  # type: ignore[union-attr]
            assert "stopped" in crashed.content
        assert breaker.state is BreakerState.OPEN
        starts = connectors.servers[0].starts
        refused = await tools.get("fake__get_status").invoke({"service": "api"})  # type: ignore[union-attr]
        assert refused.content.startswith("connector fake is failing: 2 errors in a row")
        assert connectors.servers[0].starts == starts  # not even restarted
        clock.advance(31)
        status = await tools.get("fake__get_status").invoke({"service": "api"})  # type: ignore[union-attr]
        assert not status.is_error and breaker.state is BreakerState.CLOSED
