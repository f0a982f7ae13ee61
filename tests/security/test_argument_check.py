"""Issue 13 item 15 beyond Slack: arguments are checked against the tool's schema before any
approval. On Feishu, on the console and with an MCP tool, a call the schema refuses posts no
card, asks nobody, is one call-log row blocked by `argument_check`, and never runs. SQLite and
PostgreSQL; Slack with an HTTP tool is tests/slack/test_argument_check.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

from bot.storage.models import Approval, CallLog
from tests.connectors.conftest import MCP_SERVER_SCRIPT, write_manifest
from tests.fakes.feishu_api import FakeFeishu
from tests.fakes.openai_server import FakeOpenAI, tool_call
from tests.fakes.ops_api import OpsAPI
from tests.feishu.e2e import FeishuBot
from tests.security.conftest import finishing
from tests.security.test_grants_elsewhere import console, feishu_cards, lark  # noqa: F401
from tests.security.test_mcp_policy import call, chat
from tests.server.conftest import ConsoleClient

MCP_COMMAND = [sys.executable, str(MCP_SERVER_SCRIPT)]
INVALID = {"service": "api"}  # `restart` requires `name` and names no `service`


def assert_blocked_once(db_rows, tool_name: str) -> None:
    [row] = db_rows(CallLog)
    assert (row.tool_name, row.result_status) == (tool_name, "blocked")
    assert "blocked by argument_check" in (row.error or "") and row.approval_id is None
    assert db_rows(Approval) == []


async def test_an_invalid_call_on_feishu_posts_no_card_and_never_runs(
    lark: FeishuBot,  # noqa: F811
    fake_feishu: FakeFeishu,
    fake_openai: FakeOpenAI,
    ops_api: OpsAPI,
    db_rows,
) -> None:
    fake_openai.script(*finishing(tool_call("ops__restart", INVALID), text="Could not."))
    event = fake_feishu.message_event("restart api", user="ou_dev")
    root = event["event"]["message"]["message_id"]
    await lark.send(event)
    await lark.wait_idle()
    assert feishu_cards(fake_feishu, root) == []
    assert ops_api.calls == []
    assert_blocked_once(db_rows, "ops__restart")


async def test_an_invalid_call_on_the_console_posts_no_card_and_never_runs(
    console: ConsoleClient,  # noqa: F811
    fake_openai: FakeOpenAI,
    ops_api: OpsAPI,
    db_rows,
) -> None:
    fake_openai.script(*finishing(tool_call("ops__restart", INVALID), text="Could not."))
    assert (await console.send("restart api", user="alice")).status == 202
    await console.wait_item(lambda i: i["kind"] == "answer")
    assert not [i for i in console.items.values() if i["kind"] == "approval"]
    assert ops_api.calls == []
    assert_blocked_once(db_rows, "ops__restart")


async def test_an_invalid_call_to_an_mcp_tool_asks_nobody_and_never_runs(
    tmp_path: Path, database_url: str, fake_openai: FakeOpenAI, db_rows, capsys
) -> None:
    """`restart_service(service: str)` on the fake MCP server, called without `service`:
    under `--approve none` an asked approval would be a rejected Approval row."""
    write_manifest(tmp_path / "m", {"name": "fake", "type": "mcp", "command": MCP_COMMAND})
    fake_openai.script(call("fake__restart_service", {"name": "api"}))
    assert await chat(tmp_path / "m", database_url, fake_openai, "restart api") == 0, (
        capsys.readouterr()
    )
    assert_blocked_once(db_rows, "fake__restart_service")
    [row] = db_rows(CallLog)
    assert "restarted" not in (row.observation or "")
