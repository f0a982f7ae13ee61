"""`chatops serve` as a real process: start-up log, /healthz, the console, shutdown, errors."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import aiohttp

from bot.cli import main
from tests.server.serve_process import free_port

CHATOPS = str(Path(sys.executable).with_name("chatops"))


def test_serve_help() -> None:
    done = subprocess.run(
        [CHATOPS, "serve", "--help"], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0
    assert "--host" in done.stdout and "--port" in done.stdout


async def _read_until(stream: asyncio.StreamReader, marker: str, seen: list[str]) -> None:
    while True:
        line = await stream.readline()
        if not line:
            raise AssertionError("chatops serve exited early:\n" + "".join(seen))
        seen.append(line.decode())
        if marker in seen[-1]:
            return


async def test_serve_starts_answers_and_stops(tmp_path: Path) -> None:
    port = free_port()
    env = {**os.environ, "PORT": str(port), "DATABASE_URL": f"sqlite:///{tmp_path / 'bot.db'}"}
    proc = await asyncio.create_subprocess_exec(
        CHATOPS, "serve", "--host", "127.0.0.1",
        cwd=tmp_path, env=env, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stderr is not None
    seen: list[str] = []
    try:
        await asyncio.wait_for(_read_until(proc.stderr, "Running on", seen), 60)
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://127.0.0.1:{port}/healthz") as health:
                assert health.status == 200
                assert (await health.json())["ok"] is True  # "recovering" while start-up recovers
            async with http.get(f"http://127.0.0.1:{port}/console/api/state") as state:
                assert (await state.json())["banner"] == (
                    "LLM not configured: set OPENAI_API_KEY or OPENAI_BASE_URL"
                )
        proc.send_signal(signal.SIGTERM)
        rest = await asyncio.wait_for(proc.stderr.read(), 30)
        assert await asyncio.wait_for(proc.wait(), 30) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    log = "".join(seen) + rest.decode()
    assert "surfaces on: console (GET /), slack off" in log
    assert "LLM not configured: set OPENAI_API_KEY or OPENAI_BASE_URL" in log
    assert f"http://127.0.0.1:{port}" in log
    assert "Traceback" not in log
    assert (tmp_path / "bot.db").exists()


def test_serve_bad_manifest_dir_is_one_line(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("CHATOPS_MANIFESTS_DIR", str(tmp_path / "missing"))
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'bot.db'}")
    assert main(["serve", "--host", "127.0.0.1", "--port", str(free_port())]) == 2
    err = capsys.readouterr().err
    assert "chatops: error: CHATOPS_MANIFESTS_DIR=" in err
    assert "Traceback" not in err


def test_serve_bad_setting_is_one_line(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("PORT", "eighty")
    assert main(["serve"]) == 2
    err = capsys.readouterr().err
    assert "chatops: error: bad configuration: PORT:" in err


def test_serve_unreachable_database_is_one_line(tmp_path: Path, monkeypatch, capsys) -> None:
    closed = free_port()
    monkeypatch.setenv("DATABASE_URL", f"postgresql+psycopg://bot:s3cret@127.0.0.1:{closed}/x")
    assert main(["serve", "--host", "127.0.0.1", "--port", str(free_port())]) == 2
    err = capsys.readouterr().err
    assert "error: cannot reach the database DATABASE_URL=postgresql+psycopg://bot:***@" in err
    assert "s3cret" not in err
