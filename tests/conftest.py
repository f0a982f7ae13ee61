"""Suite-wide fixtures: a clean environment per test and a database on SQLite and PostgreSQL."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest
from sqlalchemy import create_engine, text

from bot.storage.database import Database, open_database
from tests.fakes.feishu_api import FakeFeishu
from tests.fakes.ops_api import OpsAPI
from tests.fakes.serving import started
from tests.fakes.slack_api import FakeSlack

POSTGRES_ADMIN_URL = os.environ.get(
    "CHATOPS_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
_CONFIG_PREFIXES = ("CHATOPS_", "SLACK_", "FEISHU_", "OPENAI_", "REACT_", "DATABASE_URL", "PORT")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path, request) -> None:
    """No test sees the developer's configuration, and no `.env` is read from the checkout."""
    for name in list(os.environ):
        if name.startswith(_CONFIG_PREFIXES):
            monkeypatch.delenv(name, raising=False)
    if "no_chdir" not in request.keywords:
        monkeypatch.chdir(tmp_path)


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path) -> Iterator[str]:
    """A fresh, empty database: a SQLite file, or a private PostgreSQL schema dropped afterwards."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'chatops.db'}"
        return
    schema = f"t_{uuid.uuid4().hex[:12]}"
    admin = create_engine(POSTGRES_ADMIN_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    try:
        sep = "&" if "?" in POSTGRES_ADMIN_URL else "?"
        yield f"{POSTGRES_ADMIN_URL}{sep}options=-csearch_path%3D{schema}"
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


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
    """The app's `Database` on a fresh, migrated `database_url` (SQLite and PostgreSQL)."""
    engine = open_database(database_url)
    database = Database(engine)
    yield database
    database.close()
    engine.dispose()


@pytest.fixture
def inbox_db(tmp_path) -> Iterator[Database]:
    """A SQLite database for the inbox that stores events before they are acknowledged."""
    engine = open_database(f"sqlite:///{tmp_path / 'inbox.db'}")
    db = Database(engine)
    yield db
    db.close()
    engine.dispose()
