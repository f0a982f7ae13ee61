"""What `chatops serve` pays before it listens: its imports, made without the cyclic collector
and frozen, and no PostgreSQL driver on SQLite."""

from __future__ import annotations

import gc
import subprocess
import sys
from pathlib import Path

import pytest

from bot.startup_imports import frozen_imports

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("enabled", [True, False], ids=["gc-on", "gc-off"])
def test_imports_run_without_the_collector_and_what_they_made_is_frozen(enabled: bool) -> None:
    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        before = gc.get_freeze_count()
        with frozen_imports():
            assert not gc.isenabled()
            made = [[i] for i in range(1000)]
        assert gc.isenabled() is enabled  # as it was before
        assert gc.get_freeze_count() >= before + len(made)
    finally:
        gc.unfreeze()
        (gc.enable if was else gc.disable)()


def test_an_import_that_fails_still_turns_the_collector_back_on() -> None:
    assert gc.isenabled()
    try:
        with pytest.raises(ImportError), frozen_imports():
            import bot.no_such_module  # type: ignore[import-not-found]  # noqa: F401
        assert gc.isenabled()
    finally:
        gc.unfreeze()


def test_the_server_on_sqlite_imports_no_postgresql_driver() -> None:
    code = (
        "import sys, bot.server; "
        "print(sorted(m for m in sys.modules if m.split('.')[0].startswith('psycopg')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
