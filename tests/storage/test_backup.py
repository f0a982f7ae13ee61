"""Backups (docs/deploying.md, "Backups"): the documented SQLite backup, run as written while
the bot's engine holds recent writes in the WAL, copies them all (a `cp` of the main file does
not), and the documented restore check reads the copy with `chatops audit`."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

from sqlalchemy import text

from bot.storage.database import create_db_engine
from bot.storage.migrate import head_revision
from tests.storage.test_migrations import _insert

ROOT = Path(__file__).resolve().parents[2]
CALLS = 25


def documented(marker: str) -> str:
    """The shell line of docs/deploying.md (continuations joined) that contains `marker`."""
    page = (ROOT / "docs" / "deploying.md").read_text()
    for block in re.findall(r"```sh\n(.*?)```", page, flags=re.DOTALL):
        for line in block.replace("\\\n", " ").splitlines():
            if marker in line:
                return line.split("  #")[0].strip()
    raise AssertionError(f"docs/deploying.md has no sh line with {marker!r}")


def _bash(line: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    line = line.replace(".venv/bin/python", sys.executable)
    line = re.sub(r"(^|\s)chatops ", rf"\1{sys.executable} -m bot.cli ", line)
    return subprocess.run(
        ["bash", "-c", line], cwd=cwd, capture_output=True, text=True, timeout=120,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
    )  # fmt: skip


def _calls(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        return conn.execute("SELECT count(*) FROM call_log").fetchone()[0]


def test_the_documented_backup_takes_what_is_still_in_the_wal(
    database_url: str, tmp_path: Path
) -> None:
    live = tmp_path / "chatops.db"
    assert database_url == f"sqlite:///{live}"  # the file the doc names, ./chatops.db
    engine = create_db_engine(database_url)  # the bot's own engine: WAL, as it runs
    try:
        with engine.begin() as conn:
            conn.execute(text("PRAGMA wal_autocheckpoint=0"))  # keep the writes in the WAL
            for n in range(CALLS):
                _insert(conn, "call_log", tool_name=f"ops__restart_{n}", requester="U0DEV")
        assert (tmp_path / "chatops.db-wal").stat().st_size > 0
        shutil.copyfile(live, tmp_path / "cp.db")  # what the doc warns against
        assert _calls(tmp_path / "cp.db") < CALLS

        done = _bash(documented("sqlite3.connect"), tmp_path)  # the bot still running
        assert done.returncode == 0, done.stderr
        (backup,) = tmp_path.glob("backup-*.db")
        assert _calls(backup) == CALLS
        with sqlite3.connect(backup) as conn:
            assert conn.execute("SELECT version_num FROM alembic_version").fetchone() == (
                head_revision(),
            )
    finally:
        engine.dispose()

    shutil.copyfile(backup, tmp_path / "backup.db")
    check = documented("chatops audit")
    assert check.startswith("DATABASE_URL=sqlite:///./backup.db chatops audit ")
    done = _bash(check, tmp_path)
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "restored.json").read_text())
    assert report["totals"]["calls"] == CALLS  # the restored call log is read, all of it


def test_the_restore_check_fails_on_a_copy_without_a_call_log(tmp_path: Path) -> None:
    sqlite3.connect(tmp_path / "backup.db").close()  # an empty file: a failed backup
    done = _bash(documented("chatops audit"), tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1 and "DATABASE_URL" in done.stderr, done.stderr
    assert not (tmp_path / "restored.json").exists()
