"""Suite-wide fixtures: a clean environment per test and a migrated database (tests/databases.py):
SQLite, and PostgreSQL too for tests marked `both_databases`."""

from __future__ import annotations

import gc
import logging
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from bot.observability.logs import LEVEL_READING_LOGGERS, NOISY_LIBRARIES
from bot.storage.database import Database, create_db_engine
from tests.databases import (
    PostgresSchemas,
    empty_sqlite,
    migrated_sqlite_template,
    sqlite_copy,
)
from tests.fakes.feishu_api import FakeFeishu
from tests.fakes.ops_api import OpsAPI
from tests.fakes.serving import started
from tests.fakes.slack_api import FakeSlack

_CONFIG_PREFIXES = ("CHATOPS_", "SLACK_", "FEISHU_", "OPENAI_", "REACT_", "DATABASE_URL", "PORT")
_TEST_PACING = ("CHATOPS_STATUS_EDIT_INTERVAL_S", "CHATOPS_ANSWER_STREAM_INTERVAL_S")
TEST_PACING_S = "0.05"


@pytest.fixture(autouse=True)
def logging_as_it_was() -> Iterator[None]:
    """`chatops serve` run in-process configures the log (levels of the noisy libraries, the
    root handler): put it back, so a later test's caplog sees what it expects."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    named = (*NOISY_LIBRARIES, *LEVEL_READING_LOGGERS)
    levels = {name: logging.getLogger(name).level for name in named}
    yield
    for name, was in levels.items():
        logging.getLogger(name).setLevel(was)
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path, request) -> None:
    """No test sees the developer's configuration, and no `.env` is read from the checkout.

    The app (in process or a child `chatops serve`) is paced for tests: production waits a
    second between two status edits and two answer-stream updates, which only makes the
    end-to-end tests wait. The pacing itself is proven by tests that set it explicitly
    (tests/runs/test_status_interval.py, test_answer_pacing.py, tests/slack/test_edit_budget.py).
    """
    for name in list(os.environ):
        if name.startswith(_CONFIG_PREFIXES):
            monkeypatch.delenv(name, raising=False)
    for name in _TEST_PACING:
        monkeypatch.setenv(name, TEST_PACING_S)
    if "no_chdir" not in request.keywords:
        monkeypatch.chdir(tmp_path)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "both_databases: run on SQLite and on PostgreSQL (the dialect matters to what it proves)",
    )
    config.addinivalue_line(
        "markers", "empty_database: `database_url` is not migrated (the test migrates it)"
    )


def pytest_collection_finish(session: pytest.Session) -> None:
    """Freeze what the collection imported (the bot, the SDKs, every test module): the cyclic
    collector then skips it in every test, as `chatops serve` does its own imports
    (`bot.startup_imports`). It spent about a sixth of a worker's CPU walking them."""
    gc.freeze()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """`database_url` is SQLite, and PostgreSQL too for tests marked `both_databases`; a test
    that parametrises `database_url` itself (PostgreSQL only, say) keeps its own choice."""
    if "database_url" not in metafunc.fixturenames:
        return
    if not metafunc.definition.get_closest_marker("both_databases"):
        return
    for mark in metafunc.definition.iter_markers("parametrize"):
        names = mark.args[0]
        if "database_url" in (names.split(",") if isinstance(names, str) else names):
            return
    metafunc.parametrize("database_url", ["sqlite", "postgresql"], indirect=True)


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This worker's migrated SQLite file, copied for every test that wants a database."""
    return migrated_sqlite_template(tmp_path_factory.mktemp("template"))


@pytest.fixture(scope="session")
def postgres_schemas() -> Iterator[PostgresSchemas]:
    """This worker's private PostgreSQL schemas (one migrated, emptied between tests)."""
    schemas = PostgresSchemas()
    yield schemas
    schemas.close()


@pytest.fixture
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, migrated database: a copy of the migrated SQLite file, or (param `postgresql`)
    the worker's migrated schema, emptied afterwards. `empty_database`: never migrated.

    Ask for it before `aiohttp_client`: fixtures end in reverse order, so the app is closed
    before its schema is emptied (an app that outlived its schema once left `DROP SCHEMA`
    waiting on its connection); connections still open then are ended anyway."""
    backend = getattr(request, "param", "sqlite")
    empty = request.node.get_closest_marker("empty_database") is not None
    if backend == "sqlite":
        if empty:
            yield empty_sqlite(tmp_path)
        else:
            yield sqlite_copy(request.getfixturevalue("sqlite_template"), tmp_path)
        return
    schemas: PostgresSchemas = request.getfixturevalue("postgres_schemas")
    with schemas.empty() if empty else schemas.migrated() as url:
        yield url


@pytest.fixture
async def ops_api() -> AsyncIterator[OpsAPI]:
    """The internal ops API the end-to-end tests' agent drives, started for one test."""
    async with started(OpsAPI()) as api:
        yield api


@pytest.fixture
async def fake_slack() -> AsyncIterator[FakeSlack]:
    """The fake Slack Web API, started for one test."""
    async with started(FakeSlack()) as fake:
        yield fake


@pytest.fixture
async def fake_feishu() -> AsyncIterator[FakeFeishu]:
    """The fake Feishu/Lark Open API, started for one test."""
    async with started(FakeFeishu()) as fake:
        yield fake


@pytest.fixture
def db(database_url: str) -> Iterator[Database]:
    """The app's `Database` on `database_url` (fresh and migrated)."""
    engine = create_db_engine(database_url)
    database = Database(engine)
    yield database
    database.close()
    engine.dispose()


@pytest.fixture
def inbox_db(tmp_path: Path, sqlite_template: Path) -> Iterator[Database]:
    """A SQLite database for the inbox that stores events before they are acknowledged."""
    engine = create_db_engine(sqlite_copy(sqlite_template, tmp_path, "inbox.db"))
    db = Database(engine)
    yield db
    db.close()
    engine.dispose()
