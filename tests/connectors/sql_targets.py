"""Real databases for the SQL connector tests: a private PostgreSQL schema, a private MariaDB
database with its own password-protected user, or a SQLite file, each made for one test and
dropped after it. Every target's URL carries a password (PostgreSQL trusts local connections, so
any password works there), so the tests can look for it where it must never appear."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.exc import OperationalError

from tests.databases import POSTGRES_ADMIN_URL

MARIADB_ADMIN_URL = os.environ.get(
    "CHATOPS_TEST_MARIADB_URL", "mysql+pymysql://root@127.0.0.1:3306/test"
)
DIALECTS = ("postgresql", "mysql", "sqlite")
PASSWORD = "Pw-s3cr3t/only+here"  # noqa: S105 - a test password, looked for in every output
QUOTED = quote(PASSWORD, safe="")
ITEMS = [(1, "alpha", "red"), (2, "beta", "green"), (3, "gamma", "blue")]


@dataclass
class Target:
    """One test's database: `url` is what the connector's environment variable holds."""

    dialect: str
    url: str
    admin: Engine  # the test's own access, for setting up and checking behind the connector
    secrets: tuple[str, ...]

    def execute(self, *statements: str, **params: Any) -> None:
        with self.admin.begin() as conn:
            for statement in statements:
                conn.execute(text(statement), params)

    def scalar(self, statement: str) -> Any:
        with self.admin.connect() as conn:
            return conn.execute(text(statement)).scalar()

    def table_exists(self, name: str) -> bool:
        with self.admin.connect() as conn:
            return self.admin.dialect.has_table(conn, name)

    def seed(self) -> None:
        """The `items` table the tests read, write and try to break."""
        self.execute(
            "CREATE TABLE items (id INTEGER PRIMARY KEY, name VARCHAR(100), colour VARCHAR(100))"
        )
        for item_id, name, colour in ITEMS:
            self.execute("INSERT INTO items VALUES (:i, :n, :c)", i=item_id, n=name, c=colour)


def _postgres() -> Iterator[Target]:
    schema = f"sqlt_{uuid.uuid4().hex[:12]}"
    root = create_engine(POSTGRES_ADMIN_URL, isolation_level="AUTOCOMMIT")
    with root.connect() as conn:
        conn.execute(text(f"CREATE SCHEMA {schema}"))
    options = f"options=-csearch_path%3D{schema}&application_name={schema}"
    base = POSTGRES_ADMIN_URL.split("://", 1)[1].split("@", 1)[1]  # host:port/db
    url = f"postgresql://postgres:{QUOTED}@{base}?{options}"
    admin = create_engine(f"{POSTGRES_ADMIN_URL}?{options}")
    try:
        yield Target("postgresql", url, admin, (url, PASSWORD, QUOTED))
    finally:
        admin.dispose()
        with root.connect() as conn:
            conn.execute(
                text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE pid <> pg_backend_pid() AND application_name = :schema"
                ),
                {"schema": schema},
            )
            conn.execute(text(f"DROP SCHEMA {schema} CASCADE"))
        root.dispose()


def _mariadb() -> Iterator[Target]:
    root = create_engine(MARIADB_ADMIN_URL, isolation_level="AUTOCOMMIT")
    try:
        with root.connect():
            pass
    except OperationalError:
        root.dispose()
        pytest.skip(f"MariaDB/MySQL is not reachable at {MARIADB_ADMIN_URL.split('@')[-1]}")
    name = f"sqlt_{uuid.uuid4().hex[:12]}"
    with root.connect() as conn:
        conn.execute(text(f"CREATE DATABASE {name}"))
        conn.execute(text(f"CREATE USER '{name}'@'%' IDENTIFIED BY :pw"), {"pw": PASSWORD})
        conn.execute(text(f"CREATE USER '{name}'@'localhost' IDENTIFIED BY :pw"), {"pw": PASSWORD})
        for host in ("%", "localhost"):
            conn.execute(text(f"GRANT ALL ON {name}.* TO '{name}'@'{host}'"))
    host = MARIADB_ADMIN_URL.split("@", 1)[1].split("/", 1)[0]
    url = f"mysql://{name}:{QUOTED}@{host}/{name}"
    admin = create_engine(MARIADB_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}")
    try:
        yield Target("mysql", url, admin, (url, PASSWORD, QUOTED))
    finally:
        admin.dispose()
        with root.connect() as conn:
            conn.execute(text(f"DROP DATABASE IF EXISTS {name}"))
            for host_ in ("%", "localhost"):
                conn.execute(text(f"DROP USER IF EXISTS '{name}'@'{host_}'"))
        root.dispose()


def _sqlite(directory: Path) -> Iterator[Target]:
    path = directory / "target.db"
    admin = create_engine(f"sqlite:///{path}")
    url = f"sqlite:///{path}"
    try:
        yield Target("sqlite", url, admin, (url,))
    finally:
        admin.dispose()


@pytest.fixture(params=DIALECTS)
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Target]:
    """A fresh database of each dialect, seeded with `items`."""
    yield from seeded(request.param, tmp_path)


def seeded(dialect: str, directory: Path) -> Iterator[Target]:
    made = {"postgresql": _postgres, "mysql": _mariadb}.get(dialect)
    targets = made() if made else _sqlite(directory)
    for one in targets:
        one.seed()
        yield one


def sql_manifest(dialect: str, **extra: Any) -> dict[str, Any]:
    """The `shop` connector the tests use: read, write and the query action."""
    return {
        "name": "shop",
        "type": "sql",
        "description": "the shop database",
        "dialect": dialect,
        "url_env": "SHOP_DB_URL",
        "timeout_s": 1,
        "actions": [
            {
                "name": "find_item",
                "description": "Find an item by id",
                "sql": "SELECT id, name, colour FROM items WHERE id = :id",
                "parameters": {
                    "type": "object",
                    "properties": {"id": {"type": "integer"}},
                    "required": ["id"],
                },
            },
            {
                "name": "rename_item",
                "description": "Rename an item",
                "sql": "UPDATE items SET name = :name WHERE id = :id",
                "parameters": {
                    "type": "object",
                    "properties": {"id": {"type": "integer"}, "name": {"type": "string"}},
                    "required": ["id", "name"],
                },
                "risk": "high",
            },
        ],
        "query": {"result": {"max_rows": 5}},
        **extra,
    }
