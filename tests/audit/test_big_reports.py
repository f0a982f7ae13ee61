"""`chatops audit` over a big call log: the listed calls are capped (`--limit`), `--out` is
written atomically (Ctrl-C leaves no file, no temporary file), and a slow report shows its
progress on stderr while a fast one stays quiet. Through `bot.cli.main` and a real
`python -m bot.cli audit` process; figures and speed are in `bench/audit_report.py`.
"""

from __future__ import annotations

import json
import os
import pty
import re
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from bench.audit_report import build_call_log
from bot.audit import cli as audit_cli
from bot.cli import main
from bot.storage.database import create_db_engine, init_schema
from tests.audit.test_cli import WINDOW

REPO = Path(__file__).resolve().parents[2]
BIG_ROWS = 60_000  # over 60 days: a CSV export of them takes seconds, a report well under one
PROGRESS = re.compile(r"^chatops audit: exporting calls(, [\d,]+ rows written)? \(\d+\.\d s\)$")


@pytest.fixture(scope="module")
def big_log(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A SQLite call log of `BIG_ROWS` calls over the last 60 days, at the schema's head."""
    path = tmp_path_factory.mktemp("big") / "audit.db"
    build_call_log(path, BIG_ROWS)
    engine = create_db_engine(f"sqlite:///{path}")
    init_schema(engine)
    engine.dispose()
    return f"sqlite:///{path}"


@pytest.fixture
def big_env(big_log: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("DATABASE_URL", big_log)
    return big_log


@pytest.fixture
def seeded_env(audit_engine: Engine, database_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("DATABASE_URL", database_url)
    return database_url


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


# ------------------------------------------------------------------ --limit


@pytest.mark.both_databases
def test_limit_lists_that_many_and_says_how_many_were_left_out(
    seeded_env: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["audit", *WINDOW, "--limit", "2"]) == 0
    out = capsys.readouterr().out
    listed = out.split("## Mutating calls (7)")[1].split("## Most frequent errors")[0]
    assert len([line for line in listed.splitlines() if line.startswith("| 2026-")]) == 2
    assert "5 more not listed (`--limit N` lists more; `--format csv` lists every call" in listed


@pytest.mark.both_databases
def test_limit_zero_is_the_summary_alone(
    seeded_env: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["audit", *WINDOW, "--format", "json", "--limit", "0"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["mutating_calls"] == []
    assert (data["mutating_calls_total"], data["mutating_calls_omitted"]) == (7, 7)
    assert data["totals"]["calls"] == 11 and data["totals"]["mutating"] == 7  # figures intact


def test_the_default_lists_a_hundred_of_a_big_window(
    big_env: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["audit", "--since", "61d", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["mutating_calls"]) == audit_cli.DEFAULT_LIMIT == 100
    total = data["totals"]["mutating"]
    assert total > 10_000 and data["mutating_calls_total"] == total
    assert data["mutating_calls_omitted"] == total - 100
    assert data["totals"]["calls"] == BIG_ROWS


def test_csv_lists_every_call_whatever_the_limit(big_env: str, tmp_path: Path) -> None:
    target = tmp_path / "calls.csv"
    assert (
        main(["audit", "--since", "61d", "--format", "csv", "--limit", "0", "--out", str(target)])
        == 0
    )
    with target.open(encoding="utf-8") as handle:
        assert sum(1 for _ in handle) == BIG_ROWS + 1  # the header, then every call


@pytest.mark.parametrize("limit", ["-1", "ten", "1.5", ""])
def test_a_bad_limit_is_a_usage_error(
    seeded_env: str, limit: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["audit", *WINDOW, "--limit", limit])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "argument --limit" in err and "Traceback" not in err


# ------------------------------------------------------------------ --out, atomically


def test_out_replaces_the_file_whole_and_leaves_no_temporary(
    seeded_env: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "out").mkdir()
    target = tmp_path / "out" / "report.md"
    target.write_text("last week's report\n")
    assert main(["audit", *WINDOW, "--out", str(target)]) == 0
    assert target.read_text(encoding="utf-8").startswith("# Audit report: 2026-11-13 12:00")
    assert leftovers(target.parent) == ["report.md"]
    assert target.stat().st_mode & 0o077 == 0  # reports quote arguments: owner only
    assert capsys.readouterr().out == ""


def test_interrupted_mid_export_leaves_the_old_file_and_no_temporary(
    seeded_env: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """Ctrl-C after some rows were written: exit 130, the target untouched, nothing else."""
    real = audit_cli.iter_calls

    def interrupted(*args: object, **kwargs: object) -> Iterator[object]:
        calls = real(*args, **kwargs)  # type: ignore[arg-type]
        yield next(calls)
        yield next(calls)
        raise KeyboardInterrupt

    monkeypatch.setattr(audit_cli, "iter_calls", interrupted)
    (tmp_path / "out").mkdir()
    target = tmp_path / "out" / "calls.csv"
    target.write_text("yesterday's export\n")
    assert main(["audit", *WINDOW, "--format", "csv", "--out", str(target)]) == 130
    assert target.read_text() == "yesterday's export\n"
    assert leftovers(target.parent) == ["calls.csv"]
    assert "chatops: interrupted" in capsys.readouterr().err


def test_a_failing_report_leaves_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The database is not the bot's (another program's SQLite file): a one-line error, and no
    file at all."""
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE notes (body TEXT)")
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{other}")
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    assert main(["audit", "--out", str(out_dir / "r.md")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "DATABASE_URL" in err, err
    assert leftovers(out_dir) == []


def test_out_into_a_missing_directory_is_a_usage_error(
    seeded_env: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["audit", *WINDOW, "--out", str(tmp_path / "nope" / "r.md")]) == 2
    assert "does not exist" in capsys.readouterr().err


# ------------------------------------------------------------------ progress on stderr


def test_a_fast_report_prints_no_progress(
    seeded_env: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "r.json"
    assert main(["audit", *WINDOW, "--format", "json", "--out", str(target)]) == 0
    assert capsys.readouterr().err == f"chatops: wrote the audit report to {target}\n"


def _audit_process(database_url: str, *argv: str, stderr: int) -> subprocess.Popen[bytes]:
    env = {**os.environ, "DATABASE_URL": database_url, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, "-m", "bot.cli", "audit", *argv],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=stderr,
    )  # fmt: skip


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_on_a_real_export_leaves_no_file(
    big_log: str, tmp_path: Path, sig: signal.Signals
) -> None:
    """A real `chatops audit` process exporting to --out shows plain progress lines on a
    piped stderr after a second; SIGINT (Ctrl-C) or SIGTERM (`kill`, a container stopping)
    mid-export: exit 130, neither the file nor its temporary one stays."""
    target = tmp_path / "calls.csv"
    proc = _audit_process(
        big_log, "--since", "61d", "--format", "csv", "--out", str(target), stderr=subprocess.PIPE
    )
    assert proc.stderr is not None
    try:
        first = proc.stderr.readline().decode().rstrip("\n")  # blocks until progress shows
        assert PROGRESS.match(first), first
        temporaries = [p for p in tmp_path.iterdir() if p.name.endswith(".part")]
        assert [p.name.startswith(".calls.csv.") for p in temporaries] == [True]
        proc.send_signal(sig)
        _, rest = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, rest
    assert "chatops: interrupted" in rest.decode()
    assert "Traceback" not in rest.decode()
    assert leftovers(tmp_path) == []


def test_progress_on_a_terminal_is_one_line_rewritten_then_cleared(
    big_log: str, tmp_path: Path
) -> None:
    """stderr a terminal: the progress line is rewritten in place (`\\r`) and cleared at the
    end, so what is left on screen is the closing message."""
    target = tmp_path / "calls.csv"
    leader, follower = pty.openpty()
    proc = _audit_process(
        big_log, "--since", "61d", "--format", "csv", "--out", str(target), stderr=follower
    )
    os.close(follower)
    seen = b""
    try:
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # the process closed the terminal: it has ended
                break
            if not chunk:
                break
            seen += chunk
        assert proc.wait(timeout=120) == 0
    finally:
        os.close(leader)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = seen.decode().replace("\r\n", "\n")
    assert text.count("\rchatops audit: exporting calls") >= 1
    assert "\n" not in text.split("chatops: wrote")[0]  # progress never scrolls
    assert "\r\x1b[K" in text  # cleared before the closing message
    assert text.endswith(f"chatops: wrote the audit report to {target}\n")
    with target.open(encoding="utf-8") as handle:
        assert sum(1 for _ in handle) == BIG_ROWS + 1
