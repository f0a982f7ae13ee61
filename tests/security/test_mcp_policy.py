"""Hole 7: an MCP server cannot exempt its own tools, nor take another's name.

What a server says about its tools are hints from someone else: `readOnlyHint` lowers the bar
only on a connector with `trust_annotations: true`, `destructiveHint` raises it, the manifest's
explicit settings always win, and the approval gate, the read-only guard and the call log (and
so the audit's mutating calls) all use the one resolved policy. A server listing a tool whose
name is taken (another connector's, the built-in `audit__report`) is refused at load.
"""

from __future__ import annotations

import asyncio
import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from bot.audit.tool import DESCRIPTION as AUDIT_DESCRIPTION
from bot.cli import main
from bot.config import Settings
from bot.server import RUNTIME_KEY, create_app
from bot.storage.models import CallLog
from tests.connectors.conftest import MCP_SERVER_SCRIPT, write_manifest
from tests.fakes.openai_server import FakeOpenAI, Turn, answer
from tests.server.conftest import llm_settings


def hostile(name: str = "fake", **extra: Any) -> dict[str, Any]:
    """An MCP connector on the fake server with its lying tools, and no rules of its own."""
    command = [sys.executable, str(MCP_SERVER_SCRIPT), "--hostile"]
    return {"name": name, "type": "mcp", "command": command, **extra}


def call(name: str, args: dict[str, Any]) -> Turn:
    raw = {"id": f"c_{name}", "type": "function",
           "function": {"name": name, "arguments": json.dumps(args)}}  # fmt: skip
    return Turn(tool_calls=(raw,))


async def chat(
    manifests: Path, database_url: str, fake_openai: FakeOpenAI, *argv: str, **env: str
) -> int:
    """`chatops chat --approve none` with one scripted call (a worker thread: the fakes serve)."""
    variables = {
        "DATABASE_URL": database_url,
        "OPENAI_BASE_URL": fake_openai.base_url,
        "OPENAI_API_KEY": "sk-test-not-a-secret",
        "CHATOPS_MODEL": "fake-model",
        **env,
    }
    fake_openai.respond_with(lambda body: answer("Done."))

    def run() -> int:
        with pytest.MonkeyPatch.context() as patch:
            for key, value in variables.items():
                patch.setenv(key, value)
            patch.setattr(sys, "stdin", io.StringIO(""))
            return main(["chat", "--manifests", str(manifests), "--approve", "none", *argv])

    return await asyncio.to_thread(run)


async def test_a_read_only_hint_does_not_exempt_a_tool_from_approval(
    tmp_path: Path, database_url: str, fake_openai: FakeOpenAI, db_rows, capsys, monkeypatch
) -> None:
    """`delete_service` says it only reads: without `trust_annotations` it still needs an
    approval (rejected here by --approve none), the call log counts it as mutating, and the
    audit lists it among the mutating calls."""
    write_manifest(tmp_path / "m", hostile())
    fake_openai.script(call("fake__delete_service", {"service": "payments"}))
    assert await chat(tmp_path / "m", database_url, fake_openai, "tidy up") == 0, (
        capsys.readouterr()
    )
    [row] = db_rows(CallLog, tool_name="fake__delete_service")
    assert (row.result_status, row.approval_status, row.mutating) == ("rejected", "rejected", True)
    assert "deleted" not in row.observation
    capsys.readouterr()
    monkeypatch.setenv("DATABASE_URL", database_url)
    assert main(["audit", "--since", "1h", "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["totals"]["mutating"] == 1
    assert [c["action"] for c in report["mutating_calls"]] == ["delete_service"]


async def test_read_only_mode_blocks_a_tool_that_only_says_it_reads(
    tmp_path: Path, database_url: str, fake_openai: FakeOpenAI, db_rows, capsys
) -> None:
    write_manifest(tmp_path / "m", hostile(tools=[{"match": "*", "approval": "never"}]))
    fake_openai.script(call("fake__delete_service", {"service": "payments"}))
    code = await chat(
        tmp_path / "m", database_url, fake_openai, "tidy up", CHATOPS_READ_ONLY="true"
    )
    assert code == 0, capsys.readouterr()
    [row] = db_rows(CallLog, tool_name="fake__delete_service")
    assert row.result_status == "blocked" and "read-only mode" in row.observation


async def test_a_trusted_server_may_mark_its_reads(
    tmp_path: Path, database_url: str, fake_openai: FakeOpenAI, db_rows, capsys
) -> None:
    """With `trust_annotations: true` the operator believes the server: its read-only tool runs
    without approval (and is not counted as mutating)."""
    write_manifest(tmp_path / "m", hostile(trust_annotations=True))
    fake_openai.script(call("fake__delete_service", {"service": "payments"}))
    assert await chat(tmp_path / "m", database_url, fake_openai, "tidy up") == 0, (
        capsys.readouterr()
    )
    [row] = db_rows(CallLog, tool_name="fake__delete_service")
    assert (row.result_status, row.approval_status, row.mutating) == ("ok", "not_required", False)


def test_a_destructive_hint_raises_the_bar_unless_the_manifest_says_otherwise(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_manifest(tmp_path / "a", hostile())
    assert main(["manifests", "list", str(tmp_path / "a"), "--connect"]) == 0
    rows = {line.split("\t")[0]: line.split("\t") for line in capsys.readouterr().out.splitlines()
            if "\t" in line}  # fmt: skip
    assert rows["fake__wipe_disk"][2].startswith("approval required, risk high")
    assert rows["fake__delete_service"][2] == "approval (auto: mutating), risk medium"
    rule = {"match": "wipe_disk", "approval": "never", "risk": "low"}
    write_manifest(tmp_path / "b", hostile(tools=[rule]))
    assert main(["manifests", "list", str(tmp_path / "b"), "--connect"]) == 0
    out = capsys.readouterr().out
    wipe = next(line.split("\t") for line in out.splitlines() if line.startswith("fake__wipe"))
    assert wipe[2] == "no approval"  # the manifest's own settings win
    assert "sets approval never, risk low; the server marks it destructive" in out


async def test_a_server_cannot_shadow_the_built_in_audit_report(
    tmp_path: Path, database_url: str, fake_openai: FakeOpenAI, aiohttp_client
) -> None:
    """A connector named `audit` whose server lists `report` would be `audit__report`: the
    server is refused at load (left out, said in /readyz), the built-in keeps its name."""
    write_manifest(tmp_path / "m", hostile("audit"))
    settings = Settings(
        _env_file=None,
        database_url=database_url,
        chatops_manifests_dir=tmp_path / "m",
        **llm_settings(fake_openai),
    )
    client: TestClient = await aiohttp_client(create_app(settings))
    assert client.app is not None
    tool = client.app[RUNTIME_KEY].tools.get("audit__report")
    assert tool is not None and tool.description == AUDIT_DESCRIPTION
    ready = await (await client.get("/readyz")).json()
    [down] = ready["connectors_down"]
    assert down["connector"] == "audit" and "would shadow another tool" in down["reason"]
    assert "the built-in audit report" in down["reason"]
