"""`chatops audit` end to end through `bot.cli.main` on the seeded database (both backends)."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import Engine

from bot.audit.output import interruptible
from bot.cli import main
from tests.audit.conftest import SECRET
from tests.audit.test_render import EXPECTED_CSV, EXPECTED_MARKDOWN

WINDOW = ["--since", "2026-11-13T12:00Z", "--until", "2026-11-20T12:00:00+00:00"]


@pytest.fixture
def seeded_env(audit_engine: Engine, database_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("DATABASE_URL", database_url)
    return database_url


def without_generated_line(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.startswith("Generated "))


def test_markdown_on_stdout(seeded_env: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", *WINDOW]) == 0
    out = capsys.readouterr().out
    assert without_generated_line(out) == without_generated_line(EXPECTED_MARKDOWN)


def test_csv_to_a_file(seeded_env: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "calls.csv"
    assert main(["audit", *WINDOW, "--format", "csv", "--out", str(target)]) == 0
    assert target.read_text(encoding="utf-8") == EXPECTED_CSV
    captured = capsys.readouterr()
    assert captured.out == ""
    assert f"wrote the audit report to {target}" in captured.err


def test_json_with_filters(seeded_env: str, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["audit", *WINDOW, "--format", "json", "--connector", "k8s", "--user", "U_LEAD"]
    assert main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    # k8s calls U_LEAD requested or decided: only A6's restart (error)
    assert data["totals"]["calls"] == 1 and data["totals"]["errors"] == 1
    assert data["query"]["connector"] == "k8s" and data["query"]["user"] == "U_LEAD"
    assert [c["arguments"] for c in data["mutating_calls"]] == [{"deployment": "worker"}]
    assert data["approvals"]["requested"] == 1


def test_every_call_listed_and_redacted(
    seeded_env: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["audit", *WINDOW, "--format", "json", "--action", "acknowledge"]) == 0
    out = capsys.readouterr().out
    assert SECRET not in out
    assert len(json.loads(out)["mutating_calls"]) == 2


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--since", "7x"], "bad window: bad time '7x'"),
        (["--since", "1d", "--until", "7d"], "bad window: the window ends before it starts"),
        (["--since", "yesterday"], "bad window: bad time 'yesterday'"),
        (["--since", "10000000w"], "bad window: bad time '10000000w'"),
        (["--connector", " "], "--connector is empty"),
        (["--out", "/nonexistent-dir/x.md"], "directory /nonexistent-dir does not exist"),
    ],
)
def test_user_errors_exit_2(
    seeded_env: str, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    assert main(["audit", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("chatops: error: ") and message in err
    assert "Traceback" not in err


def test_unknown_format_exit_2(seeded_env: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["audit", "--format", "xml"])
    assert exc.value.code == 2
    assert "invalid choice: 'xml'" in capsys.readouterr().err


def test_database_without_a_call_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'empty.db'}")
    assert main(["audit"]) == 2
    assert "no database at DATABASE_URL=sqlite:///" in capsys.readouterr().err
    assert not (tmp_path / "empty.db").exists()  # a report never creates the database


def test_unreachable_database(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgresql+psycopg://auditor:s3cret-pw@127.0.0.1:1/x")
    assert main(["audit"]) == 2
    err = capsys.readouterr().err
    assert "cannot reach the database DATABASE_URL=postgresql+psycopg://" in err
    assert "s3cret-pw" not in err


def test_feedback_counts_follow_the_window_and_the_filters(
    seeded_env: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """R1's answer: two up, one down in the window; the run started 8 days ago never counts;
    `--user` keeps the ratings of runs they asked for or ratings they gave."""
    assert main(["audit", *WINDOW, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["feedback"] == {
        "answers_rated": 1, "up": 2, "down": 1,
    }  # fmt: skip
    assert main(["audit", *WINDOW, "--format", "json", "--user", "U_BOB"]) == 0
    assert json.loads(capsys.readouterr().out)["feedback"] == {
        "answers_rated": 1, "up": 0, "down": 1,
    }  # fmt: skip
    assert main(["audit", "--since", "30d", "--format", "json", "--connector", "github"]) == 0
    assert json.loads(capsys.readouterr().out)["feedback"]["answers_rated"] == 0


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_an_interrupt_swallowed_where_it_landed_still_ends_the_report(sig: signal.Signals) -> None:
    """The handler raises KeyboardInterrupt wherever the main thread is: in a finalizer it is
    printed as "Exception ignored" and lost, and the export would run to the end. The mark
    it leaves ends the report at the next row."""
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signal handlers are the main thread's")
    before = signal.getsignal(sig)
    with interruptible() as interrupts:
        interrupts.check()  # nothing received yet
        try:
            os.kill(os.getpid(), sig)
            time.sleep(1)  # the handler runs here, at the latest
        except KeyboardInterrupt:
            pass  # swallowed, as a finalizer would
        with pytest.raises(KeyboardInterrupt):
            interrupts.check()
    assert signal.getsignal(sig) is before
