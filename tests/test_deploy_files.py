"""The deploy files name only files and settings that exist (they cannot be built here: no
Docker daemon, no network), and the lock file is current with pyproject.toml."""

from __future__ import annotations

import fnmatch
import re
import tomllib
from pathlib import Path

import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from bot.config import Settings

REPO = Path(__file__).resolve().parents[1]
SETTINGS = {name.upper() for name in Settings.model_fields}
PLATFORM_VARIABLES = {"PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED", "PIP_NO_CACHE_DIR",
                      "PIP_DISABLE_PIP_VERSION_CHECK", "WITH_NODE"}  # fmt: skip


def dockerfile() -> str:
    return (REPO / "Dockerfile").read_text()


def test_the_dockerfile_copies_files_that_exist_and_reach_the_build_context() -> None:
    ignored = [
        line.strip() for line in (REPO / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]  # fmt: skip
    sources = [
        source
        for args in re.findall(r"^COPY (.+)$", dockerfile(), flags=re.MULTILINE)
        for source in args.split()[:-1]
    ]
    assert "requirements.lock" in sources and "bot" in sources
    for source in sources:
        assert (REPO / source).exists(), source
        assert not any(fnmatch.fnmatch(source, pattern) for pattern in ignored), source


def test_the_dockerfile_sets_only_real_settings_and_runs_unprivileged() -> None:
    text = dockerfile()
    set_vars = set(re.findall(r"^\s*(?:ENV )?([A-Z][A-Z0-9_]+)=", text, flags=re.MULTILINE))
    set_vars |= set(re.findall(r"^ARG ([A-Z][A-Z0-9_]+)", text, flags=re.MULTILINE))
    assert {"DATABASE_URL", "CHATOPS_MANIFESTS_DIR", "PORT"} <= set_vars
    assert set_vars <= SETTINGS | PLATFORM_VARIABLES, set_vars - SETTINGS - PLATFORM_VARIABLES
    assert re.search(r"^USER chatops$", text, flags=re.MULTILINE)
    assert "--require-hashes -r /tmp/src/requirements.lock" in text
    assert "--no-deps /tmp/src" in text  # the package, on the locked dependencies only


def test_compose_runs_two_bots_on_its_postgres_with_real_settings() -> None:
    compose = yaml.safe_load((REPO / "compose.yaml").read_text())
    services = compose["services"]
    postgres = services["postgres"]["environment"]
    bots = {name: s for name, s in services.items() if s.get("build") == "."}
    assert len(bots) == 2
    user, password, db = (postgres[f"POSTGRES_{k}"] for k in ("USER", "PASSWORD", "DB"))
    expected = f"postgresql+psycopg://{user}:{password}@postgres:5432/{db}"
    nodes = set()
    for bot in bots.values():
        assert set(bot["environment"]) <= SETTINGS
        assert bot["environment"]["DATABASE_URL"] == expected
        assert bot["env_file"] == ".env" and (REPO / ".env.example").is_file()
        nodes.add(bot["environment"]["CHATOPS_NODE_NAME"])
    assert len(nodes) == 2  # each process names its own host in leases


def locked(lock: str = "requirements.lock") -> dict[str, str]:
    text = (REPO / lock).read_text()
    pins = re.findall(r"^([A-Za-z0-9_.\-]+)==([^\s\\]+)", text, flags=re.MULTILINE)
    return {canonicalize_name(name): version for name, version in pins}


def test_the_lock_file_pins_every_runtime_dependency_within_its_bounds() -> None:
    """Current: each dependency pyproject.toml declares is pinned, at a version its bounds
    allow, with hashes (`pip install --require-hashes`); regenerate it with the command in its
    header when this fails."""
    pins = locked()
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    for line in project["dependencies"]:
        requirement = Requirement(line)
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{name} is not in requirements.lock"
        assert requirement.specifier.contains(pins[name], prereleases=True), (name, pins[name])
    text = (REPO / "requirements.lock").read_text()
    hashed = re.findall(r"^[A-Za-z0-9_.\-]+==[^\s\\]+ \\\n\s+--hash=sha256:", text, re.MULTILINE)
    assert len(hashed) == len(pins)  # every pin carries its hashes
    assert "--find-links" not in text and "--index-url" not in text  # nothing of this machine


def test_the_dev_lock_pins_the_dev_extra_and_the_same_runtime() -> None:
    """`make test` (and so CI) installs from requirements-dev.lock: it pins every dev
    dependency within its bounds, and the runtime exactly as requirements.lock does."""
    runtime, dev = locked(), locked("requirements-dev.lock")
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    for line in project["optional-dependencies"]["dev"]:
        requirement = Requirement(line)
        name = canonicalize_name(requirement.name)
        assert name in dev, f"{name} is not in requirements-dev.lock"
        assert requirement.specifier.contains(dev[name], prereleases=True), (name, dev[name])
    assert {name: dev.get(name) for name in runtime} == runtime
