"""What `make run` and `make test` install on a fresh clone: the bot alone, or with its tests.

`make -n` prints the commands make would run in a checkout with no `.venv` yet (a fresh clone),
without running them: a real venv here would take a minute of the suite's time.
"""

from __future__ import annotations

import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

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
    return tmp_path


def test_make_run_installs_the_bot_without_the_dev_extra(fresh_clone: Path) -> None:
    installs = [line for line in planned("run", fresh_clone) if "pip install" in line]
    assert installs[-2].endswith("install --quiet --require-hashes -r requirements.lock"), installs
    assert installs[-1].endswith("install --quiet --no-deps -e .")  # the bot, on the locked ones
    assert not any("[dev]" in line for line in installs)


def test_make_test_installs_the_dev_extra(fresh_clone: Path) -> None:
    installs = [line for line in planned("test", fresh_clone) if "pip install" in line]
    assert installs[-2].endswith("--require-hashes -r requirements-dev.lock"), installs
    assert installs[-1].endswith("install --quiet --no-deps -e .")


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
