"""MCP beyond text, against a real SDK server (`tests/fakes/mcp_rich_server.py`) over stdio and
streamable HTTP: images, resource links and embedded resources reach the model in words,
task-only tools are left out, a restarted remote server gets a new session, timeouts are named.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from bot.engine.tools import Audience
from connectors.connector_set import ConnectorSet
from tests.connectors.conftest import REPO, write_manifest
from tests.fakes.mcp_rich_server import PNG

RICH_SERVER = REPO / "tests" / "fakes" / "mcp_rich_server.py"


@asynccontextmanager
async def http_server(port: int = 0, *extra: str) -> AsyncIterator[int]:
    """The rich server as a separate process on streamable HTTP; yields its port."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(RICH_SERVER), "--http", "--port", str(port), *extra,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode().strip()
        assert line.startswith("PORT="), line
        yield int(line.removeprefix("PORT="))
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 30)


@asynccontextmanager
async def loaded(tmp_path: Path, http, **manifest: object) -> AsyncIterator[ConnectorSet]:
    write_manifest(tmp_path / "m", {"name": "rich", "type": "mcp", "timeout_s": 30, **manifest})
    connectors = await ConnectorSet.load(tmp_path / "m", http=http, environ={})
    try:
        assert connectors.down == []
        yield connectors
    finally:
        await connectors.close()


@pytest.fixture(params=["stdio", "http"])
async def rich(request, tmp_path: Path, http) -> AsyncIterator[ConnectorSet]:
    if request.param == "stdio":
        async with loaded(tmp_path, http, command=[sys.executable, str(RICH_SERVER)]) as tools:
            yield tools
        return
    async with http_server() as port:
        url = f"http://127.0.0.1:{port}/mcp"
        async with loaded(tmp_path, http, url=url) as tools:
            yield tools


async def call(connectors: ConnectorSet, name: str, args: dict) -> str:
    tool = connectors.tools.get(f"rich__{name}")
    assert tool is not None, name
    result = await tool.invoke(args)
    assert not result.is_error, result.content
    return result.content


async def test_an_image_is_described_in_the_text_and_attached_beside_it(
    rich: ConnectorSet,
) -> None:
    tool = rich.tools.get("rich__chart")
    assert tool is not None
    result = await tool.invoke({"service": "api"})
    assert result.content == "CPU of api, last hour\n[image 1 (image/png, 70 bytes)]"
    [image] = result.images
    assert image.mime_type == "image/png"
    assert base64.b64decode(image.data) == PNG


async def test_images_a_model_cannot_read_are_only_described(rich: ConnectorSet) -> None:
    tool = rich.tools.get("rich__diagram")
    assert tool is not None
    result = await tool.invoke({})
    assert result.images == ()
    assert result.content == (
        "[image (image/svg+xml, 6 bytes): not shown to the model]\n"
        "[image (image/png, 8 bytes): not shown to the model]"
    )


async def test_progress_notifications_reach_the_report_cleaned(rich: ConnectorSet, tmp_path):
    tool = rich.tools.get("rich__migrate")
    assert tool is not None and tool.invoke_for is not None
    hold = tmp_path / "hold"
    seen: list[tuple[float, float | None, str]] = []

    async def report(progress: float, total: float | None, message: str) -> None:
        seen.append((progress, total, message))
        if len(seen) == 2:
            hold.touch()

    result = await tool.invoke_for(Audience(progress=report), {"hold": str(hold)})
    assert result.content == "migrated"
    assert seen == [(1, 3, "copying rows"), (2, 3, "checking rows"), (3, 3, "done")]


async def test_a_resource_link_gives_its_uri_and_cleaned_words(rich: ConnectorSet) -> None:
    assert await call(rich, "find_runbook", {"service": "api"}) == (
        "[resource link: file:///runbooks/api.md 'Runbook: api' (text/markdown, 2.0 KB)] "
        "How to restart it."
    )


async def test_embedded_resources_give_their_text_or_describe_their_bytes(
    rich: ConnectorSet,
) -> None:
    assert await call(rich, "read_runbook", {"service": "api"}) == (
        "[resource file:///runbooks/api.md (text/markdown)]\n# api\n\n1. Drain.\n2. Restart.\n"
        "[resource file:///runbooks/api.pdf (application/pdf, 2.9 KB): not shown to the model]\n"
        "[resource file:///runbooks/api.log (text/plain, 7 bytes): not shown to the model]"
    )


async def test_a_task_only_tool_is_left_out_with_a_warning(tmp_path: Path, http, caplog) -> None:
    caplog.set_level(logging.WARNING, logger="connectors.mcp")
    legacy = [sys.executable, str(REPO / "tests" / "fakes" / "mcp_tasks_server.py")]
    async with loaded(tmp_path, http, command=legacy) as rich:
        assert rich.tools.names() == ["rich__ping"]
        pong = await rich.tools.get("rich__ping").invoke({})  # type: ignore[union-attr]
        assert pong.content == "pong"
    assert (
        "MCP server rich: tool 'background_export' left out: it can only be called as a task "
        "(execution.taskSupport: required), which chatops does not support"
    ) in caplog.text


async def test_a_restarted_remote_server_gets_a_new_session_and_the_call_is_made_again(
    tmp_path: Path, http, caplog
) -> None:
    caplog.set_level(logging.INFO)  # the SDK logs the session id at INFO: not here
    first = http_server(0, "--legacy")  # MCP 2026-07-28 has no sessions to lose
    port = await first.__aenter__()
    url = f"http://127.0.0.1:{port}/mcp"
    async with loaded(tmp_path, http, url=url) as rich:
        try:
            assert await call(rich, "nap", {"seconds": 0}) == "awake"
            server = rich.servers[0]
            assert server.starts == 1
        finally:
            await first.__aexit__(None, None, None)
        async with http_server(port, "--legacy") as again:  # the old process is gone; same address
            assert again == port
            assert await call(rich, "nap", {"seconds": 0}) == "awake"
            assert server.starts == 2
            assert await call(rich, "nap", {"seconds": 0}) == "awake"
            assert server.starts == 2  # the new session is kept
    assert (
        "MCP server rich no longer knows our session (HTTP 404; did it restart?): "
        "starting a new session and calling 'nap' again"
    ) in caplog.text
    assert [r.name for r in caplog.records if r.name.startswith("mcp")] == []


async def test_a_call_that_outlives_the_timeout_names_it(tmp_path: Path, http) -> None:
    command = [sys.executable, str(RICH_SERVER)]
    async with loaded(tmp_path, http, command=command, timeout_s=5) as rich:
        tool = rich.tools.get("rich__nap")
        assert tool is not None
        result = await tool.invoke({"seconds": 60})
        assert result.is_error and result.content == (
            "MCP server 'rich' did not answer the call to 'nap' within 5s (the connector's "
            "timeout_s); the call may still be running on the server."
        )
