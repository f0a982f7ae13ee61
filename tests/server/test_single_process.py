"""SQLite is single-process: a second real `chatops serve` on the same file refuses to start,
with one line and no traceback, and leaves the first one serving."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import aiohttp
import pytest

from bot.errors import StartupError
from bot.storage.single_process import SqliteProcessLock, single_process_guard, sqlite_file
from tests.server.serve_process import CHATOPS, free_port, serving


async def serve_once(cwd: Path, env: dict[str, str]) -> tuple[int, str]:
    """Run `chatops serve` to its end (it is expected to stop by itself): exit code, stderr."""
    proc = await asyncio.create_subprocess_exec(
        CHATOPS, "serve", "--host", "127.0.0.1", "--port", str(free_port()),
        cwd=cwd, env={**os.environ, **env},
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        _, err = await asyncio.wait_for(proc.communicate(), 60)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise AssertionError("the second chatops serve did not stop by itself") from None
    return proc.returncode or 0, err.decode()


async def test_a_second_serve_on_the_same_sqlite_file_refuses_to_start(tmp_path: Path) -> None:
    database = tmp_path / "data" / "chatops.db"
    database.parent.mkdir()
    env = {"DATABASE_URL": f"sqlite:///{database}"}
    async with aiohttp.ClientSession() as http, serving(tmp_path, env) as first:
        code, err = await serve_once(tmp_path, env)
        lines = err.strip().splitlines()
        assert code != 0, err
        assert len(lines) == 1 and lines[0].startswith("chatops: error: "), err
        assert "Traceback" not in err
        assert f"pid {first.pid}" in lines[0]
        assert str(database) in lines[0]
        assert "single-process" in lines[0] and "PostgreSQL" in lines[0]
        async with http.get(f"{first.url}/healthz") as response:  # the first one is untouched
            assert response.status == 200
            assert (await response.json())["ok"] is True
        # another file is another database: a process on it starts next to the first one
        other = {"DATABASE_URL": f"sqlite:///{tmp_path / 'other.db'}"}
        async with serving(tmp_path, other) as neighbour:
            await neighbour.stop()
        await first.kill()  # `kill -9`: the kernel drops the lock, nothing stale is left
    async with serving(tmp_path, env) as again:
        assert await again.stop() == 0


def test_the_lock_is_per_database_file_and_released(tmp_path: Path) -> None:
    database = tmp_path / "chatops.db"
    with SqliteProcessLock(database) as held:
        assert held.path == tmp_path / "chatops.db.lock"
        assert held.path.read_text().strip() == str(os.getpid())
        with pytest.raises(StartupError, match=rf"pid {os.getpid()}\b.*PostgreSQL"):
            SqliteProcessLock(database).acquire()
    with SqliteProcessLock(database):  # released: taken again
        pass


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("postgresql+psycopg://postgres@127.0.0.1:5432/test", None),
        ("sqlite://", None),
        ("sqlite:///:memory:", None),
        ("sqlite:///./chatops.db", "chatops.db"),
    ],
)
def test_only_sqlite_files_are_guarded(url: str, expected: str | None, tmp_path: Path) -> None:
    found = sqlite_file(url)
    assert (found.name if found else None) == expected
    assert (single_process_guard(url) is None) == (expected is None)
