"""The layering of DESIGN §1 is a test: `lint-imports` keeps the contracts in pyproject.toml.

The real tree passes; a copy of it with one deliberate upward import (the engine importing the
server) fails, naming the broken contract and the import. The engine's contract lists every
sibling of `bot.engine` by name, so a new top-level module must be added to it: checked here.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
ENGINE_CONTRACT = "The engine imports nothing of bot/ outside bot.engine"


def lint_imports(cwd: Path) -> subprocess.CompletedProcess[str]:
    """`lint-imports` on the packages found from `cwd` (they come first on the path)."""
    env = {**os.environ, "PYTHONPATH": str(cwd), "NO_COLOR": "1", "COLUMNS": "200"}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def contracts() -> list[dict]:
    with (ROOT / "pyproject.toml").open("rb") as file:
        return tomllib.load(file)["tool"]["importlinter"]["contracts"]


def test_the_tree_keeps_every_contract() -> None:
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "BROKEN" not in result.stdout
    assert f"Contracts: {len(contracts())} kept, 0 broken." in result.stdout


def test_an_upward_import_in_the_engine_fails_and_names_the_contract(tmp_path: Path) -> None:
    for package in ("bot", "hooks", "connectors"):
        shutil.copytree(
            ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    agent = tmp_path / "bot" / "engine" / "agent.py"
    agent.write_text(agent.read_text() + "\nimport bot.server  # noqa: E402, F401\n")

    result = lint_imports(tmp_path)

    output = " ".join((result.stdout + result.stderr).split())  # the report wraps long names
    assert result.returncode != 0, output
    assert f"{ENGINE_CONTRACT}, no hook, connector, storage or platform SDK BROKEN" in output
    assert "bot.engine is not allowed to import bot.server" in output
    assert "bot.engine.agent -> bot.server" in output
    assert "Nothing but the CLI imports the server BROKEN" in output


def top_level_modules() -> set[str]:
    """Every module and package directly under bot/, plus the other root packages."""
    return {"hooks", "connectors"} | {
        f"bot.{path.stem}"
        for path in (ROOT / "bot").iterdir()
        if path.name != "__init__.py"
        and (path.suffix == ".py" or (path / "__init__.py").exists())
    }


def test_the_contracts_name_every_top_level_module() -> None:
    """A new module under bot/ must be named by the contracts that list modules one by one."""
    by_id = {c["id"]: c for c in contracts()}
    outside_engine = top_level_modules() - {"bot.engine"}
    assert outside_engine <= set(by_id["engine"]["forbidden_modules"])
    assert top_level_modules() - {"bot.cli"} <= set(by_id["cli"]["source_modules"])
    assert top_level_modules() - {"bot.cli", "bot.server"} <= set(by_id["server"]["source_modules"])


# `RunContext.extra[...]`, `extra.get(...)`, `notes["..."]`, `notes.get("...")`: the string-keyed
# run dependencies and hook notes that `RunContext[Deps]` and typed notes replaced
STRING_KEYED = re.compile(r"""\bextra\s*(\[|\.get\()|\bnotes\s*(\[|\.get\()\s*["']""")


def test_no_string_keyed_run_deps_or_notes_are_left() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for package in ("bot", "hooks", "connectors")
        for path in sorted((ROOT / package).rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if STRING_KEYED.search(line)
    ]
    assert found == []
    assert STRING_KEYED.search('thread = ctx.run.extra.get("thread")')  # the check can fail
    assert STRING_KEYED.search("status = notes.get('approval_status')")
