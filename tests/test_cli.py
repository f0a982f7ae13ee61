"""The `chatops` command as a user runs it: help, usage errors, and output into a closed pipe."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bot.cli import main

REPO = Path(__file__).resolve().parents[1]


def test_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for command in ("serve", "chat", "audit", "manifests"):
        assert command in out


def test_version_names_the_installed_distribution() -> None:
    """`chatops --version`, the installed console script, prints the package's version."""
    from importlib import metadata

    script = Path(sys.executable).with_name("chatops")
    done = subprocess.run([str(script), "--version"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"chatops {metadata.version('chatops')}"


def test_output_into_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    shutil.copytree(REPO / "manifests", tmp_path / "manifests")
    for n in range(150):  # well over the 64 KB pipe buffer of a reader that left
        (tmp_path / "manifests" / f"copy{n}.yaml").write_text(
            (REPO / "manifests" / "github.yaml")
            .read_text()
            .replace("name: github", f"name: g{n}", 1)
        )
    producer = subprocess.Popen(
        [sys.executable, "-m", "bot.cli", "manifests", "list"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)},
    )
    assert producer.stdout is not None
    producer.stdout.readline()
    producer.stdout.close()  # like `| head -1`
    _, err = producer.communicate(timeout=60)
    assert b"Traceback" not in err
    assert producer.returncode in (0, 141)
