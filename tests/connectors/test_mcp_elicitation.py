"""A server's question mid-call (MCP elicitation) against the SDK server's `restart` tool, over
stdio and streamable HTTP, on MCP 2026-07-28 (input requests) and 2025-11-25 (a request mid-call,
`--legacy`): the call's `ask` port gets it and the server gets the answer; a call with nobody to
ask, or two calls at once (which one asks cannot be told), gets a cancel, never a guess."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.engine.tools import Audience, Question, Reply
from connectors.connector_set import ConnectorSet
from tests.connectors.test_mcp_content import RICH_SERVER, http_server, loaded


@pytest.fixture(params=["stdio", "http", "http-legacy"])
async def rich(request, tmp_path: Path, http) -> AsyncIterator[ConnectorSet]:
    if request.param == "stdio":
        command = [sys.executable, str(RICH_SERVER)]
        async with loaded(tmp_path, http, command=command) as tools:
            yield tools
        return
    legacy = ("--legacy",) if request.param == "http-legacy" else ()
    async with (
        http_server(0, *legacy) as port,
        loaded(tmp_path, http, url=f"http://127.0.0.1:{port}/mcp") as tools,
    ):
        yield tools


async def test_the_question_reaches_ask_and_the_answer_the_server(rich: ConnectorSet) -> None:
    tool = rich.tools.get("rich__restart")
    assert tool is not None and tool.invoke_for is not None
    asked: list[Question] = []

    async def ask(question: Question) -> Reply:
        asked.append(question)
        return Reply("accept", {"minutes": 15, "reason": "patch", "decision": "reject"})

    result = await tool.invoke_for(Audience(ask=ask), {"service": "api", "pretend": "\x1b[2JOk?"})
    assert result.content == "restart of api: 15 min, 'patch', reject"
    [question] = asked
    assert (question.asker, question.message) == ("rich", "Ok?")  # escape sequences cleaned
    assert question.schema["required"] == ["minutes", "reason"]
    assert list(question.schema["properties"]) == ["minutes", "reason", "decision"]

    async def decline(question: Question) -> Reply:
        return Reply("decline")

    declined = await tool.invoke_for(Audience(ask=decline), {"service": "db"})
    assert declined.content == "restart of db: decline"


async def test_a_call_with_nobody_to_ask_is_cancelled(rich: ConnectorSet) -> None:
    tool = rich.tools.get("rich__restart")
    assert tool is not None
    assert (await tool.invoke({"service": "api"})).content == "restart of api: cancel"


async def test_two_calls_at_once_cannot_tell_who_asks_so_the_question_is_cancelled(
    rich: ConnectorSet,
) -> None:
    """The request does not name its call: guessing could show one thread's question to
    another thread's people, so it is cancelled while another call that can ask runs."""
    nap, restart = rich.tools.get("rich__nap"), rich.tools.get("rich__restart")
    assert nap is not None and nap.invoke_for is not None
    assert restart is not None and restart.invoke_for is not None
    asked: list[Question] = []

    async def ask(question: Question) -> Reply:
        asked.append(question)
        return Reply("accept", {"minutes": 5, "reason": "x"})

    napping = asyncio.create_task(nap.invoke_for(Audience(ask=ask), {"seconds": 2}))
    await asyncio.sleep(0.5)
    result = await restart.invoke_for(Audience(ask=ask), {"service": "api"})
    assert result.content == "restart of api: cancel"
    assert asked == []
    assert (await napping).content == "awake"
