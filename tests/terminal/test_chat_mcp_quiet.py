"""`chatops chat` with a careless stdio MCP server (the SDK's, `tests/fakes/mcp_rich_server.py`
`chatter`): what it writes on stderr and stray stdout lines stays off the user's terminal, and
the token it was given never shows, on the terminal or in the log."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest

from connectors.connector_set import ConnectorSet
from tests.connectors.conftest import REPO, write_manifest
from tests.fakes.openai_server import FakeOpenAI, answer, tool_call
from tests.terminal.test_chat_cli import chat_subprocess

RICH_SERVER = REPO / "tests" / "fakes" / "mcp_rich_server.py"
TOKEN = "rich-t0ken-never-sh0wn"


def chatter_manifest(directory: Path) -> None:
    write_manifest(directory, {
        "name": "rich", "type": "mcp", "command": [sys.executable, str(RICH_SERVER)],
        "env": {"RICH_TOKEN": "CHATOPS_TEST_RICH_TOKEN"}, "timeout_s": 30,
        "tools": [{"match": "*", "approval": "never"}],
    })  # fmt: skip


async def test_a_chatty_server_stays_off_the_terminal(
    tmp_path: Path, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    chatter_manifest(tmp_path / "m")
    monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-secret")
    monkeypatch.setenv("CHATOPS_MODEL", "fake-model")
    monkeypatch.setenv("CHATOPS_TEST_RICH_TOKEN", TOKEN)
    fake_openai.script(tool_call("rich__chatter", {}), answer("loop"), answer("It chatted."))
    code, out, err = await chat_subprocess(tmp_path / "m", b"", "--approve", "all", "chat")
    assert code == 0, err
    assert out.strip() == "It chatted."
    assert TOKEN not in out + err
    assert "DEBUG connecting" not in err  # the server's stderr is for the log, at DEBUG
    assert "Traceback" not in err and "mcp." not in err  # nothing of the SDK's own
    tool_message = next(m for m in fake_openai.messages(1) if m["role"] == "tool")
    assert tool_message["content"] == "chatted"


async def test_what_the_server_writes_is_logged_redacted(tmp_path: Path, http, caplog) -> None:
    chatter_manifest(tmp_path / "m")
    caplog.set_level(logging.DEBUG, logger="connectors")
    connectors = await ConnectorSet.load(
        tmp_path / "m", http=http, environ={"CHATOPS_TEST_RICH_TOKEN": TOKEN}
    )
    try:
        tool = connectors.tools.get("rich__chatter")
        assert tool is not None
        assert (await tool.invoke({})).content == "chatted"
    finally:
        await connectors.close()
    assert "stderr: DEBUG connecting with token [REDACTED]" in caplog.text
    assert "hello from the server, token=[REDACTED]" in caplog.text  # the SDK moves it to stderr
    assert TOKEN not in caplog.text
