"""Hole 6: the audit trail has no gaps, `chatops chat` included.

`chatops chat` opens `DATABASE_URL` (migrated like `chatops serve`) and writes the same call log:
every attempt is one row, however malformed (an unknown tool, arguments that do not parse,
arguments that are not an object), and every approval answered at the terminal is an approval
row decided by the OS user, on the `terminal` platform.
"""

from __future__ import annotations

import asyncio
import getpass
import io
import json
import socket
import sys
from pathlib import Path
from typing import Any

import pytest

from bot.cli import main
from bot.storage.models import Approval, ApprovalDecision, CallLog, Run
from tests.fakes.openai_server import FakeOpenAI, Turn, answer
from tests.fakes.ops_api import OpsAPI


def call(name: str, arguments: str) -> Turn:
    """One native call whose raw `arguments` text is exactly what the server sent."""
    raw = {"id": f"c_{name}_{len(arguments)}", "type": "function",
           "function": {"name": name, "arguments": arguments}}  # fmt: skip
    return Turn(tool_calls=(raw,))


@pytest.fixture
def chat_env(
    database_url: str, manifests: Path, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> Path:
    monkeypatch.setenv("DATABASE_URL", database_url)
    monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-secret")
    monkeypatch.setenv("CHATOPS_MODEL", "fake-model")
    return manifests


async def chat(manifests: Path, *argv: str, stdin: str = "") -> int:
    """`chatops chat` in a worker thread (the fakes keep serving on this loop)."""

    def run() -> int:
        saved = sys.stdin
        sys.stdin = io.StringIO(stdin)
        try:
            return main(["chat", "--manifests", str(manifests), *argv])
        finally:
            sys.stdin = saved

    return await asyncio.to_thread(run)


async def test_chatops_chat_logs_every_attempt_and_who_approved_it(
    chat_env: Path, fake_openai: FakeOpenAI, ops_api: OpsAPI, db_rows, capsys
) -> None:
    fake_openai.script(
        call("ops__nuke", "{}"),  # no such tool
        call("ops__get_service", '{"name": "api"'),  # not JSON
        call("ops__get_service", "[1, 2]"),  # JSON, not an object
        call("ops__restart", json.dumps({"name": "api"})),
    )
    fake_openai.respond_with(lambda body: answer("Restarted."))  # checklist, answer, synthesis
    code = await chat(chat_env, "--approve", "ask", "restart", "api", stdin="y\n")
    assert code == 0, capsys.readouterr().err
    assert ops_api.restarts == ["api"]
    user = getpass.getuser()
    rows = sorted(db_rows(CallLog), key=lambda r: r.id)
    assert [(r.tool_name, r.result_status) for r in rows] == [
        ("ops__nuke", "error"),
        ("ops__get_service", "error"),
        ("ops__get_service", "error"),
        ("ops__restart", "ok"),
    ]
    assert all(r.platform == "terminal" and r.requesters == [user] for r in rows)
    assert "unknown tool" in (rows[0].error or "") and "not a JSON object" in (rows[1].error or "")
    restart = rows[3]
    assert restart.approval_status == "approved" and restart.approvers == [user]
    [approval] = db_rows(Approval)
    assert approval.id == restart.approval_id and approval.decided_by == [user]
    assert approval.status == "approved" and approval.card_platform == "terminal"
    assert [(d.user_id, d.decision) for d in db_rows(ApprovalDecision)] == [(user, "approve")]
    [run] = db_rows(Run)
    assert run.status == "done" and run.requester == user


async def test_a_call_rejected_at_the_terminal_is_logged_with_who_rejected_it(
    chat_env: Path, fake_openai: FakeOpenAI, ops_api: OpsAPI, db_rows, capsys
) -> None:
    fake_openai.script(
        call("ops__restart", json.dumps({"name": "api"})), answer("No."), answer("No.")
    )
    code = await chat(chat_env, "--approve", "none", "restart", "api")
    assert code == 0, capsys.readouterr().err
    assert ops_api.restarts == []
    user = getpass.getuser()
    [row] = db_rows(CallLog)
    assert (row.result_status, row.approval_status, row.approvers) == (
        "rejected",
        "rejected",
        [user],
    )
    [approval] = db_rows(Approval)
    assert approval.status == "rejected" and approval.decided_by == [user]


def test_chatops_chat_without_its_database_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    env: dict[str, Any] = {
        "DATABASE_URL": f"postgresql+psycopg://bot:s3cret@127.0.0.1:{closed}/x",
        "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert main(["chat", "--manifests", str(tmp_path), "hello"]) == 2
    err = capsys.readouterr().err
    assert "cannot reach the database DATABASE_URL=postgresql+psycopg://bot:***@" in err
    assert "s3cret" not in err and "Traceback" not in err


async def test_arguments_nested_deeper_than_64_levels_are_one_malformed_row_and_never_run(
    chat_env: Path, fake_openai: FakeOpenAI, ops_api: OpsAPI, db_rows, capsys
) -> None:
    """Deeper nesting could exhaust the stack when hashed or logged: refused before any hook,
    even under `--approve all`, and logged once."""
    deep = "[" * 65 + "]" * 65
    fake_openai.script(
        call("ops__restart", '{"name": "api", "reason": ' + deep + "}"),
        answer("Could not."),
        answer("Could not."),
    )
    code = await chat(chat_env, "--approve", "all", "restart", "api")
    assert code == 0, capsys.readouterr().err
    assert ops_api.restarts == [] and ops_api.calls == []
    [row] = db_rows(CallLog)
    assert (row.tool_name, row.result_status) == ("ops__restart", "error")
    assert "not a JSON object" in (row.error or "")
    assert db_rows(Approval) == []
