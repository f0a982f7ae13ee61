"""`chatops chat` and `chatops serve` on one database: the terminal's run is owned and leased
like any other, so serve's recovery (which takes over what gone processes left) never adopts
it, nor fails it for want of a surface; its run row (what the
audit and the console read) shows it done."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

from bot.storage.models import BotProcess, Run
from tests.databases import rows
from tests.fakes.openai_server import FakeOpenAI, Turn, answer
from tests.fakes.slack_api import FakeSlack
from tests.server.serve_process import CHATOPS, serve_env, serving

pytestmark = pytest.mark.both_databases  # beside chat: SQLite's one process, PostgreSQL's leases

LEASE_S = "2"  # serve looks for orphans at every beat: three times a lease
ANSWER = "All quiet on the terminal."


def replies(body: dict[str, Any]) -> Turn:
    return answer(ANSWER)


async def chat(tmp_path: Path, env: dict[str, str], *argv: str) -> tuple[int, str, str]:
    """A real `chatops` CLI process: (exit status, stdout, stderr), bounded."""
    proc = await asyncio.create_subprocess_exec(
        CHATOPS, *argv, cwd=tmp_path, env={**os.environ, **env},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        out, err = await asyncio.wait_for(proc.communicate(), 60)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    return proc.returncode or 0, out.decode(), err.decode()


async def test_serve_recovery_leaves_a_running_terminal_run_alone(
    tmp_path: Path, database_url: str, fake_slack: FakeSlack, fake_openai: FakeOpenAI
) -> None:
    """The terminal's run waits on the model for several of serve's recovery scans; it ends
    done, never failed by serve; its lease is released at the end. (SQLite too: serve's lock
    keeps a second serve away, not the terminal.)"""
    fake_openai.respond_with(replies)
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    env = serve_env(
        database_url=database_url, manifests=manifests, slack_url=fake_slack.url,
        llm_url=fake_openai.base_url, chatops_lease_s=LEASE_S,
    )  # fmt: skip
    async with serving(tmp_path, env) as serve:
        await serve.wait_log("recovery done")
        fake_openai.hold()
        terminal = asyncio.create_task(chat(tmp_path, env, "chat", "--approve", "none", "hi"))
        await fake_openai.wait_for_requests(1, 30)
        [run] = rows(database_url, Run)
        assert run.status == "running" and run.owner, run
        scans = len(serve.log)
        await asyncio.sleep(3 * float(LEASE_S))  # many beats of serve's, each a recovery scan
        fake_openai.release()
        code, out, err = await terminal
        assert code == 0, err
        assert out.strip() == ANSWER
        said = "".join(serve.log[scans:])
        assert "adopted run" not in said and "no surface" not in said, said
        owner = run.owner
    [run] = rows(database_url, Run)
    assert (run.status, run.error, run.answer, run.owner) == ("done", None, ANSWER, owner)
    assert owner not in {p.id for p in rows(database_url, BotProcess)}  # its lease released
