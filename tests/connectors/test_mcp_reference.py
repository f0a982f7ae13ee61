"""The reference MCP servers from PyPI (`mcp-server-time`, `mcp-server-git`, `mcp-server-fetch`)
as real stdio servers: their real tools and outputs reach the model, policies follow their
hints, `list --connect` shows them, and one that exits at once says why.

Nothing here reaches the internet: the time and git tools are local, and the fetch server
fetches from the fake API on 127.0.0.1 (or is refused, which is its own protection).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.approvals.schema import policy_of
from bot.cli import main
from connectors.connector_set import ConnectorSet
from tests.connectors.conftest import write_manifest
from tests.fakes.http_api import FakeHttpApi

BIN = Path(sys.executable).parent


def server(name: str, *args: str, **extra: object) -> dict:
    return {"name": name, "type": "mcp", "command": [str(BIN / f"mcp-server-{name}"), *args],
            "timeout_s": 60, **extra}  # fmt: skip


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository with one commit and one changed file."""
    path = tmp_path / "repo"
    path.mkdir()
    git = ["git", "-C", str(path), "-c", "user.email=dev@example.com", "-c", "user.name=Dev"]
    subprocess.run([*git, "init", "-q"], check=True)
    (path / "README.md").write_text("hello\n")
    subprocess.run([*git, "add", "README.md"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "First commit"], check=True)
    (path / "README.md").write_text("hello again\n")
    return path


@pytest.fixture
async def reference(tmp_path: Path, repo: Path, http) -> AsyncIterator[ConnectorSet]:
    directory = tmp_path / "m"
    # the reference servers are trusted to say which of their tools only read
    write_manifest(
        directory,
        server("time", "--local-timezone", "UTC", description="clock", trust_annotations=True),
    )
    write_manifest(directory, server("git", "--repository", str(repo), trust_annotations=True))
    write_manifest(directory, server("fetch", "--ignore-robots-txt", "--allow-private-ips"))
    connectors = await ConnectorSet.load(directory, http=http, environ={})
    try:
        yield connectors
    finally:
        await connectors.close()


async def test_time_and_git_tools_answer_for_real(reference: ConnectorSet, repo: Path) -> None:
    assert reference.down == []
    tools = reference.tools
    now = tools.get("time__get_current_time")
    assert now is not None and now.description.endswith("(time: clock)")
    result = await now.invoke({"timezone": "Europe/Paris"})
    assert not result.is_error and json.loads(result.content)["timezone"] == "Europe/Paris"
    converted = await tools.get("time__convert_time").invoke(  # type: ignore[union-attr]
        {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}
    )
    assert json.loads(converted.content)["target"]["timezone"] == "Asia/Tokyo"
    where = {"repo_path": str(repo)}
    status = await tools.get("git__git_status").invoke(where)  # type: ignore[union-attr]
    log = await tools.get("git__git_log").invoke(where)  # type: ignore[union-attr]
    assert "README.md" in status.content and "First commit" in log.content


async def test_their_hints_decide_approval_under_auto_when_trusted(
    reference: ConnectorSet,
) -> None:
    tools = reference.tools
    for read_only in ("git__git_status", "git__git_log", "time__get_current_time"):
        assert not policy_of(tools.get(read_only)).requires_approval  # type: ignore[union-attr]
    for mutating in ("git__git_add", "git__git_commit", "git__git_checkout"):
        assert policy_of(tools.get(mutating)).requires_approval  # type: ignore[union-attr]


async def test_fetch_reads_a_local_page(reference: ConnectorSet, fake_api: FakeHttpApi) -> None:
    fake_api.route(
        "GET", "/runbook", text="<html><body><h1>Runbook</h1><p>Restart api.</p></body></html>",
        headers={"Content-Type": "text/html"},
    )  # fmt: skip
    fetch = reference.tools.get("fetch__fetch")
    assert fetch is not None
    result = await fetch.invoke({"url": f"{fake_api.url}/runbook"})
    assert not result.is_error and "Restart api." in result.content
    assert [r.path for r in fake_api.requests] == ["/runbook"]


def test_list_connect_shows_the_reference_servers(tmp_path: Path, repo: Path, capsys) -> None:
    directory = tmp_path / "m"
    write_manifest(directory, server("time"))
    write_manifest(directory, server("git", "--repository", str(repo), trust_annotations=True))
    assert main(["manifests", "list", str(directory), "--connect"]) == 0
    out = capsys.readouterr().out
    rows = {line.split("\t")[0]: line.split("\t") for line in out.splitlines() if "\t" in line}
    assert rows["git__git_commit"][2] == "approval (auto: mutating), risk medium"
    assert rows["git__git_log"][2] == "no approval (auto: read-only)"
    assert rows["time__convert_time"][2] == "approval (auto: mutating), risk medium"  # untrusted
    assert "the server marks it read-only (readOnlyHint) and trust_annotations is on" in out
    assert "the server says read-only, but trust_annotations is off" in out


async def test_a_reference_server_that_exits_at_once_says_why(tmp_path: Path, http, caplog):
    write_manifest(tmp_path / "m", server("git", "--repository", str(tmp_path / "nowhere")))
    connectors = await ConnectorSet.load(tmp_path / "m", http=http, environ={})
    try:
        [down] = connectors.down
        assert down.reason.startswith("exited with status 1; the last lines of its stderr: ")
        assert "nowhere does not exist" in down.reason
        assert "Traceback" not in caplog.text
    finally:
        await connectors.close()
