"""The layering of DESIGN §1 is a test: `lint-imports` keeps the contracts in pyproject.toml.

The real tree passes; a copy of it with one deliberate upward import (the engine importing the
server, the chat vocabulary a service, storage the inbox, approvals a run, a hook a surface)
fails, naming the `layers` contract and the import. The layers name every top-level module by
name, so a new module must be placed in the order: checked here.
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
LAYERS_CONTRACT = (
    "bot/ is layered: wiring > surfaces > hooks > runs, audit, connectors > elicitation > approvals"
)
ELICITATION_CONTRACT = "A tool's question (MCP elicitation) cannot reach what decides an approval"


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


# (file that gets the import, the module it imports, its layer, the layer above it)
UPWARD = [
    ("bot/engine/agent.py", "bot.server", "bot.engine", "bot.server"),
    ("bot/chat/threads.py", "bot.runs.manager", "bot.chat", "bot.runs"),
    ("bot/chat/ports.py", "bot.inbox.inbox", "bot.chat", "bot.inbox"),
    ("bot/storage/queries.py", "bot.inbox.records", "bot.storage", "bot.inbox"),
    ("bot/approvals/broker.py", "bot.runs.active", "bot.approvals", "bot.runs"),
    ("bot/elicitation/service.py", "bot.runs.active", "bot.elicitation", "bot.runs"),
    ("hooks/guards.py", "bot.surfaces.slack.inbound", "hooks", "bot.surfaces"),
]


def test_each_upward_import_fails_and_is_named(tmp_path: Path) -> None:
    """One copy of the tree, one deliberate upward import per file (one `lint-imports` run
    reports every broken layer, so each one is seen to fail by its own line)."""
    for package in ("bot", "hooks", "connectors"):
        shutil.copytree(
            ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    for path, imported, _, _ in UPWARD:
        target = tmp_path / path
        target.write_text(target.read_text() + f"\nimport {imported}  # noqa: E402, F401\n")
    # below the layer, but what decides approvals: a server's question must never reach it
    service = tmp_path / "bot/elicitation/service.py"
    service.write_text(service.read_text() + "\nimport bot.approvals.broker  # noqa: E402, F401\n")

    result = lint_imports(tmp_path)

    output = " ".join((result.stdout + result.stderr).split())  # the report wraps long names
    assert result.returncode != 0, output
    assert f"{LAYERS_CONTRACT}" in output and "BROKEN" in output
    for path, imported, layer, above in UPWARD:
        assert f"{layer} is not allowed to import {above}" in output
        importer = path.removesuffix(".py").replace("/", ".")
        assert f"{importer} -> {imported}" in output
    assert f"{ELICITATION_CONTRACT} BROKEN" in output
    assert "bot.elicitation is not allowed to import bot.approvals.broker" in output
    assert "bot.elicitation.service -> bot.approvals.broker" in output


def top_level_modules() -> set[str]:
    """Every module and package directly under bot/, plus the other root packages."""
    return {"hooks", "connectors"} | {
        f"bot.{path.stem}"
        for path in (ROOT / "bot").iterdir()
        if path.name != "__init__.py" and (path.suffix == ".py" or (path / "__init__.py").exists())
    }


def test_the_layers_name_every_top_level_module_once() -> None:
    """A new module under bot/ must be placed in the order (the layers contract ignores a
    module it does not name)."""
    (layers,) = [c for c in contracts() if c["type"] == "layers"]
    named = [m.strip() for layer in layers["layers"] for m in layer.split("|")]
    assert sorted(named) == sorted(top_level_modules())


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
