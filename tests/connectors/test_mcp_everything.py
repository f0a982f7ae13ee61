"""The reference MCP server from npm, `@modelcontextprotocol/server-everything` (a server nobody
here wrote, made to exercise every client feature), over stdio and streamable HTTP, through the
real connector loading: its tools are imported (its task-only tool left out), text, images,
resource links, embedded resources, progress and elicitation reach chatops as they should.

It is installed by `make test` (`npm ci --prefix tests/mcp_reference`, pinned by the committed
package-lock.json) and started with `node`; nothing is downloaded while the tests run. Without
node or the installed package these tests skip and say why (the SDK server in
tests/fakes/mcp_rich_server.py covers the same features in test_mcp_content.py).
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import shutil
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from bot.engine.tools import Audience, Question, Reply
from connectors.connector_set import ConnectorSet
from tests.connectors.conftest import REPO, write_manifest

PACKAGE = REPO / "tests" / "mcp_reference" / "node_modules" / "@modelcontextprotocol"
ENTRY = PACKAGE / "server-everything" / "dist" / "index.js"
LOOPBACK = REPO / "tests" / "mcp_reference" / "loopback.mjs"  # its HTTP server on 127.0.0.1 only
NODE = shutil.which("node")

# the image its get-tiny-image tool returns, as its source declares it (the MCP logo, PNG)
TINY_IMAGE_PREFIX = "iVBORw0KGgoAAAANSUhEUgAAABQAAAAUCAYAAACNiR0NAAA"

# every tool the pinned version (package-lock.json) offers a client that can answer elicitation
TOOLS = [
    "echo", "get-annotated-message", "get-env", "get-resource-links", "get-resource-reference",
    "get-structured-content", "get-sum", "get-tiny-image", "gzip-file-as-resource",
    "toggle-simulated-logging", "toggle-subscriber-updates", "trigger-long-running-operation",
    "trigger-elicitation-request", "trigger-url-elicitation",
]  # fmt: skip


def node_command() -> list[str]:
    """`node <entry>`, or a skip that says what is missing."""
    if NODE is None:
        pytest.skip("node is not on PATH: the server-everything tests need Node.js and npm")
    if not ENTRY.is_file():
        pytest.skip(
            f"{ENTRY.relative_to(REPO)} is not installed: run `make test` "
            "(or `npm ci --prefix tests/mcp_reference`) first"
        )
    return [NODE, str(ENTRY)]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@asynccontextmanager
async def http_server() -> AsyncIterator[int]:
    """server-everything on streamable HTTP (it takes its port from `PORT`), on 127.0.0.1
    only and without our environment (its get-env tool prints it); yields the port once it
    says it listens. A port taken between choosing and binding is tried again."""
    node, entry = node_command()
    for _attempt in range(3):
        port = free_port()
        proc = await asyncio.create_subprocess_exec(
            node, "--import", LOOPBACK.as_uri(), entry, "streamableHttp",
            env={"PATH": os.environ.get("PATH", ""), "PORT": str(port)},
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        assert proc.stderr is not None
        try:
            line = (await asyncio.wait_for(proc.stderr.readline(), 30)).decode()
            if "listening on port" in line:
                yield port
                return
            assert "already in use" in line, line
        finally:
            if proc.returncode is None:
                proc.terminate()
            await asyncio.wait_for(proc.wait(), 30)
    raise AssertionError("no free port for server-everything in three tries")


@asynccontextmanager
async def loaded(tmp_path: Path, http, **manifest: object) -> AsyncIterator[ConnectorSet]:
    write_manifest(
        tmp_path / "m", {"name": "everything", "type": "mcp", "timeout_s": 30, **manifest}
    )
    connectors = await ConnectorSet.load(tmp_path / "m", http=http, environ=manifest_environ())
    try:
        assert connectors.down == []
        yield connectors
    finally:
        await connectors.close()


def manifest_environ() -> dict[str, str]:
    return {"EVERYTHING_TOKEN": "tok-everything-s3cret-value"}


@pytest.fixture(params=["stdio", "http"])
async def everything(request, tmp_path: Path, http) -> AsyncIterator[ConnectorSet]:
    if request.param == "stdio":
        command = [*node_command(), "stdio"]
        env = {"EVERYTHING_TOKEN": "EVERYTHING_TOKEN"}
        async with loaded(tmp_path, http, command=command, env=env) as tools:
            yield tools
        return
    async with (
        http_server() as port,
        loaded(tmp_path, http, url=f"http://127.0.0.1:{port}/mcp") as tools,
    ):
        yield tools


async def call(connectors: ConnectorSet, name: str, args: dict, audience: Audience | None = None):
    tool = connectors.tools.get(f"everything__{name}")
    assert tool is not None, name
    if audience is None:
        result = await tool.invoke(args)
    else:
        assert tool.invoke_for is not None
        result = await tool.invoke_for(audience, args)
    assert not result.is_error, result.content
    return result


async def test_its_tools_are_imported_and_the_task_only_one_left_out(
    tmp_path: Path, http, caplog
) -> None:
    caplog.set_level(logging.WARNING, logger="connectors.mcp")
    async with loaded(tmp_path, http, command=[*node_command(), "stdio"]) as everything:
        assert everything.tools.names() == [f"everything__{name}" for name in TOOLS]
        echo = everything.tools.get("everything__echo")
        assert echo is not None and echo.parameters["required"] == ["message"]
    assert (
        "MCP server everything: tool 'simulate-research-query' left out: it can only be called "
        "as a task (execution.taskSupport: required), which chatops does not support"
    ) in caplog.text


async def test_echo_and_sum_answer(everything: ConnectorSet) -> None:
    assert (await call(everything, "echo", {"message": "hello"})).content == "Echo: hello"
    total = await call(everything, "get-sum", {"a": 2, "b": 40})
    assert total.content == "The sum of 2 and 40 is 42."


async def test_arguments_its_schema_refuses_are_never_sent(everything: ConnectorSet) -> None:
    echo = everything.tools.get("everything__echo")
    assert echo is not None
    result = await echo.invoke({"message": 5})
    assert result.is_error
    assert result.content.startswith("Invalid arguments for everything__echo; nothing was sent.")
    assert "- message: 5 is not of type 'string'" in result.content


async def test_the_tiny_image_comes_back_as_an_image_beside_its_words(
    everything: ConnectorSet,
) -> None:
    result = await call(everything, "get-tiny-image", {})
    assert result.content == (
        "Here's the image you requested:\n[image 1 (image/png, 3.9 KB)]\n"
        "The image above is the MCP logo."
    )
    [image] = result.images
    assert image.mime_type == "image/png" and image.data.startswith(TINY_IMAGE_PREFIX)
    assert base64.b64decode(image.data).startswith(b"\x89PNG\r\n\x1a\n")
    assert TINY_IMAGE_PREFIX not in result.content  # the bytes never ride in the text


async def test_resource_links_give_their_uris_names_and_descriptions(
    everything: ConnectorSet,
) -> None:
    result = await call(everything, "get-resource-links", {"count": 2})
    assert result.content == (
        "Here are 2 resource links to resources available in this server:\n"
        "[resource link: demo://resource/dynamic/blob/1 'Blob Resource 1' (text/plain)] "
        "Resource 1: plaintext resource\n"
        "[resource link: demo://resource/dynamic/text/2 'Text Resource 2' (text/plain)] "
        "Resource 2: plaintext resource"
    )


async def test_embedded_resources_pass_their_text_and_uri(everything: ConnectorSet) -> None:
    text = await call(
        everything, "get-resource-reference", {"resourceType": "Text", "resourceId": 2}
    )
    lines = text.content.splitlines()
    assert lines[:2] == [
        "Returning resource reference for Resource 2:",
        "[resource demo://resource/dynamic/text/2 (text/plain)]",
    ]
    assert lines[2].startswith("Resource 2: This is a plaintext resource created at ")
    assert lines[3] == "You can access this resource using the URI: demo://resource/dynamic/text/2"
    # a text resource sent as base64 (a blob of text/plain) is still text the model can read
    blob = await call(
        everything, "get-resource-reference", {"resourceType": "Blob", "resourceId": 1}
    )
    lines = blob.content.splitlines()
    assert lines[1] == "[resource demo://resource/dynamic/blob/1 (text/plain)]"
    assert lines[2].startswith("Resource 1: This is a base64 blob created at ")


async def test_structured_content_and_an_annotated_error_message(everything: ConnectorSet) -> None:
    weather = await call(everything, "get-structured-content", {"location": "New York"})
    assert json.loads(weather.content) == {
        "temperature": 33,
        "conditions": "Cloudy",
        "humidity": 82,
    }
    message = await call(
        everything, "get-annotated-message", {"messageType": "error", "includeImage": True}
    )
    assert message.content == "Error: Operation failed\n[image 1 (image/png, 3.9 KB)]"
    assert [image.mime_type for image in message.images] == ["image/png"]


async def test_progress_notifications_reach_the_report(everything: ConnectorSet) -> None:
    seen: list[tuple[float, float | None, str]] = []

    async def report(progress: float, total: float | None, message: str) -> None:
        seen.append((progress, total, message))

    result = await call(
        everything, "trigger-long-running-operation", {"duration": 0.3, "steps": 3},
        Audience(progress=report),
    )  # fmt: skip
    assert result.content == ("Long running operation completed. Duration: 0.3 seconds, Steps: 3.")
    assert seen == [(1, 3, ""), (2, 3, ""), (3, 3, "")]


async def test_its_form_question_reaches_ask_and_the_answer_the_server(
    everything: ConnectorSet,
) -> None:
    asked: list[Question] = []

    async def ask(question: Question) -> Reply:
        asked.append(question)
        return Reply("accept", {"name": "Ada Lovelace", "check": True, "integer": 7})

    result = await call(everything, "trigger-elicitation-request", {}, Audience(ask=ask))
    [question] = asked
    assert question.asker == "everything"
    assert question.message == "Please provide inputs for the following fields:"
    assert question.schema["required"] == ["name"]
    assert {"name", "check", "email", "integer", "titledMultipleSelectEnum"} <= set(
        question.schema["properties"]
    )
    assert "- Name: Ada Lovelace" in result.content
    raw = json.loads(result.content.split("Raw result: ", 1)[1])
    assert raw == {"action": "accept", "content": {"name": "Ada Lovelace", "check": True,
                                                   "integer": 7}}  # fmt: skip

    async def decline(question: Question) -> Reply:
        return Reply("decline")

    declined = await call(everything, "trigger-elicitation-request", {}, Audience(ask=decline))
    assert "declined" in declined.content.lower()


async def test_a_question_with_nobody_to_ask_is_cancelled(everything: ConnectorSet) -> None:
    result = await call(everything, "trigger-elicitation-request", {})
    assert "cancel" in result.content.lower()


async def test_a_url_elicitation_is_declined_and_never_asked(everything: ConnectorSet) -> None:
    asked: list[Question] = []

    async def ask(question: Question) -> Reply:
        asked.append(question)
        return Reply("accept", {})

    result = await call(
        everything, "trigger-url-elicitation", {"url": "https://sso.example.com/approve"},
        Audience(ask=ask),
    )  # fmt: skip
    assert asked == []
    assert "decline" in result.content.lower()
    tool = everything.tools.get("everything__trigger-url-elicitation")
    assert tool is not None and tool.invoke_for is not None
    args = {"url": "https://sso.example.com/approve", "errorPath": True}  # as an MCP error
    refused = await tool.invoke_for(Audience(ask=ask), args)
    assert refused.is_error and refused.content.startswith("MCP server 'everything' error -32042")
    assert asked == [] and "sso.example.com" not in refused.content


async def test_a_stdio_server_sees_only_the_variables_its_manifest_passes_and_they_are_redacted(
    tmp_path: Path, http, monkeypatch
) -> None:
    """The bot's own secrets stay out of the server's environment; the one it is given is
    redacted from what it says back (get-env prints its whole environment)."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-bot-own-key-never-for-servers")
    command = [*node_command(), "stdio"]
    env = {"EVERYTHING_TOKEN": "EVERYTHING_TOKEN"}
    async with loaded(tmp_path, http, command=command, env=env) as everything:
        result = await call(everything, "get-env", {})
    assert "sk-bot-own-key-never-for-servers" not in result.content
    assert "OPENAI_API_KEY" not in result.content
    assert "tok-everything-s3cret-value" not in result.content
    assert '"EVERYTHING_TOKEN":"[REDACTED]"' in result.content  # given, hidden on the way back


def listening_addresses(port: int) -> set[str]:
    """The local addresses (hex, as /proc/net/tcp* spells them) listening on `port`."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table, encoding="ascii") as lines:
            for line in list(lines)[1:]:
                local, state = line.split()[1], line.split()[3]
                address, hex_port = local.split(":")
                if state == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                    found.add(address)
    return found


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads Linux's /proc/net/tcp")
async def test_the_http_server_listens_on_loopback_only_and_without_our_environment(
    tmp_path: Path, http, monkeypatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-bot-own-key-never-for-servers")
    async with (
        http_server() as port,
        loaded(tmp_path, http, url=f"http://127.0.0.1:{port}/mcp") as everything,
    ):
        assert listening_addresses(port) == {"0100007F"}  # 127.0.0.1, nothing else
        result = await call(everything, "get-env", {})
    assert json.loads(result.content).keys() <= {"PATH", "PORT"}
