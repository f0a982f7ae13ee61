"""Rolling back (docs/deploying.md, "Rolling back"): the documented downgrade command works as
written, every revision's downgrade works down to an empty database and up again, and an older
version started on a schema a newer one migrated stops with one line, touching nothing."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from alembic import command
from sqlalchemy import create_engine, func, select, table, text

from bot.storage.migrate import alembic_config, current_revision, head_revision, upgrade
from tests.server.serve_process import free_port
from tests.storage.test_migrations import _insert, _schema_diff

pytestmark = [pytest.mark.both_databases, pytest.mark.empty_database]  # it migrates

ROOT = Path(__file__).resolve().parents[2]
FUTURE = "0099_from_a_newer_version"


def documented_downgrade() -> tuple[str, str]:
    """The shell command of docs/deploying.md that downgrades, and the revision it names."""
    text_ = (ROOT / "docs" / "deploying.md").read_text()
    blocks = re.findall(r"```sh\n(.*?)```", text_, flags=re.DOTALL)
    block = next(b for b in blocks if "command.downgrade" in b)
    line = block.replace("\\\n", " ").strip()
    return line, shlex.split(line)[-1]


def _revisions(url: str) -> list[str]:
    """Every revision from head down to the first, in order."""
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(alembic_config(url=url))
    return [rev.revision for rev in script.walk_revisions()]


def test_the_documented_command_rolls_back_and_serve_migrates_again(
    database_url: str, tmp_path: Path
) -> None:
    line, target = documented_downgrade()
    assert line.startswith("DATABASE_URL=") and ".venv/bin/python -c" in line
    engine = create_engine(database_url)
    try:
        upgrade(engine)
        with engine.begin() as conn:
            _insert(conn, "call_log", tool_name="ops__restart", requester="U0DEV")
        # as written, with this test's database and interpreter
        words = shlex.split(line)
        words[0] = f"DATABASE_URL={database_url}"
        words[words.index(".venv/bin/python")] = sys.executable
        done = subprocess.run(
            ["env", f"PYTHONPATH={ROOT}", "PATH=/usr/bin:/bin", *words],
            cwd=tmp_path, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert current_revision(engine) == target != head_revision()
        assert upgrade(engine) == head_revision() == current_revision(engine)
        assert _schema_diff(engine) == []
        with engine.connect() as conn:  # the audit trail went down and up untouched
            assert conn.execute(select(func.count()).select_from(table("call_log"))).scalar() == 1
    finally:
        engine.dispose()


def test_every_revision_downgrades_to_an_empty_database_and_up_again(database_url: str) -> None:
    engine = create_engine(database_url)
    try:
        upgrade(engine)
        revisions = _revisions(database_url)
        assert revisions[0] == head_revision() and len(revisions) >= 14
        for below in [*revisions[1:], None]:
            with engine.begin() as conn:
                command.downgrade(alembic_config(conn), below or "base")
            assert current_revision(engine) == below
        assert upgrade(engine) == head_revision()
        assert _schema_diff(engine) == []
    finally:
        engine.dispose()


def test_an_older_version_on_a_newer_schema_stops_with_one_line(
    database_url: str, tmp_path: Path
) -> None:
    """What an operator meets after rolling the code back but not the schema: `chatops serve`
    (a real process) says which revision it found and what to do, exit 2, no traceback, and
    the schema is left as it was."""
    engine = create_engine(database_url)
    try:
        upgrade(engine)
        with engine.begin() as conn:
            conn.execute(text("UPDATE alembic_version SET version_num = :v"), {"v": FUTURE})
        done = subprocess.run(
            [sys.executable, "-m", "bot.cli", "serve", "--host", "127.0.0.1",
             "--port", str(free_port())],
            cwd=tmp_path, capture_output=True, text=True, timeout=120,
            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "DATABASE_URL": database_url,
                 "CHATOPS_MANIFESTS_DIR": str(tmp_path)},
        )  # fmt: skip
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        last = done.stderr.strip().splitlines()[-1]
        assert last.startswith(f"chatops: error: the database is at schema revision {FUTURE}, ")
        assert f"its newest is {head_revision()}" in last and "Rolling back" in last
        assert current_revision(engine) == FUTURE
    finally:
        engine.dispose()
