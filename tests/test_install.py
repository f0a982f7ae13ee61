"""What `make run` and `make test` install on a fresh clone: the bot alone, or with its tests.

`make -n` prints the commands make would run in a checkout with no `.venv` yet (a fresh clone),
without running them: a real venv here would take a minute of the suite's time.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tools.install_locked import pip_commands, uv_commands, uv_source_flags

REPO = Path(__file__).resolve().parents[1]


def planned(target: str, checkout: Path) -> list[str]:
    done = subprocess.run(
        ["make", "-n", target], cwd=checkout, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


@pytest.fixture
def fresh_clone(tmp_path: Path) -> Path:
    for name in ("Makefile", "pyproject.toml", "requirements.lock", "requirements-dev.lock"):
        shutil.copy(REPO / name, tmp_path / name)
    npm = tmp_path / "tests" / "mcp_reference"  # the npm reference MCP server, pinned
    npm.mkdir(parents=True)
    for name in ("package.json", "package-lock.json"):
        shutil.copy(REPO / "tests" / "mcp_reference" / name, npm / name)
    return tmp_path


def test_make_run_installs_the_bot_without_the_dev_extra(fresh_clone: Path) -> None:
    installs = [line for line in planned("run", fresh_clone) if "install_locked.py" in line]
    assert installs == [".venv/bin/python tools/install_locked.py .venv requirements.lock"]


def test_make_test_installs_the_dev_extra(fresh_clone: Path) -> None:
    installs = [line for line in planned("test", fresh_clone) if "install_locked.py" in line]
    assert installs == [".venv/bin/python tools/install_locked.py .venv requirements-dev.lock"]


def test_make_test_installs_the_npm_reference_server_from_its_lock_file(fresh_clone: Path) -> None:
    """`npm ci` (the lock file, exactly), only when npm is there; `make run` never does."""
    plan = "\n".join(planned("test", fresh_clone))
    assert "command -v npm" in plan
    assert "npm ci --prefix tests/mcp_reference --no-audit --no-fund" in plan
    assert "npm install" not in plan and "npx" not in plan
    assert "npm" not in "\n".join(planned("run", fresh_clone))


PIP_CONFIG = """\
:env:.find-links='/opt/wheels'
global.cert='/etc/ssl/certs/ca-certificates.crt'
global.extra-index-url='file:///opt/pypi/simple file:///opt/pypi-more/simple'
global.find-links='/opt/wheels'
"""


def test_uv_reads_the_sources_pip_is_configured_with() -> None:
    assert uv_source_flags(PIP_CONFIG) == [
        "--find-links", "/opt/wheels",
        "--extra-index-url", "file:///opt/pypi/simple",
        "--extra-index-url", "file:///opt/pypi-more/simple",
    ]  # fmt: skip
    assert uv_source_flags("global.index-url=''\n") == []


def test_both_installers_check_every_hash(tmp_path: Path) -> None:
    for commands in (uv_commands(tmp_path, "x.lock", PIP_CONFIG), pip_commands(tmp_path, "x.lock")):
        lock, project = commands
        assert lock[-3:] == ["--require-hashes", "-r", "x.lock"]
        assert project[-3:] == ["--no-deps", "-e", "."]  # the bot alone, on the locked ones


def recording_venv(tmp_path: Path, *, uv_status: int) -> Path:
    """A venv whose `pip` and `uv` only record how they were called (`calls`)."""
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    for tool, status in (("pip", 0), ("uv", uv_status)):
        script = bin_dir / tool
        script.write_text(f'#!/bin/sh\necho "{tool} $*" >> {tmp_path}/calls\nexit {status}\n')
        script.chmod(0o755)
    return bin_dir.parent


@pytest.mark.parametrize("uv_status", [0, 1])
def test_pip_installs_the_lock_when_uv_cannot(tmp_path: Path, uv_status: int) -> None:
    venv = recording_venv(tmp_path, uv_status=uv_status)
    done = subprocess.run(
        [sys.executable, str(REPO / "tools" / "install_locked.py"), str(venv), "x.lock"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    calls = (tmp_path / "calls").read_text().splitlines()
    installs = [c for c in calls if "install" in c]
    if uv_status == 0:
        assert installs[0].startswith("uv pip install") and "-r x.lock" in installs[0]
        assert not any(c.startswith("pip install") for c in installs)
    else:  # uv failed on the lock: pip does the whole job, and says so
        assert installs[-2:] == [
            "pip install --quiet --require-hashes -r x.lock",
            "pip install --quiet --no-deps -e .",
        ]
        assert "installing it with pip" in done.stderr


def test_no_test_package_is_a_runtime_dependency() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    runtime = {_name(d) for d in project["dependencies"]}
    dev = {_name(d) for d in project["optional-dependencies"]["dev"]}
    assert not runtime & dev
    assert not {"pytest", "playwright", "mini-racer", "hypothesis"} & runtime


def _name(requirement: str) -> str:
    for stop in "<>=![; ":
        requirement = requirement.split(stop, 1)[0]
    return requirement.strip().lower()
