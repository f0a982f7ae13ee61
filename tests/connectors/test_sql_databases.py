"""SQL connectors on the real PostgreSQL, MariaDB and SQLite: declared queries and writes, the
`query` action refusing the hostile table with the data untouched, the read-only transaction
refusing a write that got past the checker, the statement timeout, the row cap, and the URL
(and its password) never in an observation, an error or a log line."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bot.approvals.schema import policy_of
from bot.engine.tools import ToolResult
from connectors.connector_set import ConnectorSet
from connectors.sql.database import ReadOnlyRefused, SqlDatabase, SqlFailed
from connectors.sql.manifest import SqlConnector
from tests.connectors.conftest import write_manifest
from tests.connectors.sql_targets import (
    ITEMS,
    PASSWORD,
    Target,
    sql_manifest,
    target,  # noqa: F401 - the fixture
)
from tests.connectors.test_sql_checker import COMMON_HOSTILE, DIALECT_HOSTILE

SLOW = {  # seconds of work, not a sleep: sleeping functions are refused
    "postgresql": "SELECT count(*) FROM generate_series(1, 1000000000)",
    "mysql": "SELECT count(*) FROM information_schema.columns a, information_schema.columns b, "
    "information_schema.columns c",
    "sqlite": "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) "
    "SELECT count(*) FROM n",
}
COUNT_TO = (
    "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < {}) SELECT x FROM n"
)


@pytest.fixture
async def shop(
    target: Target,  # noqa: F811
    tmp_path: Path,
) -> AsyncIterator[ConnectorSet]:
    async with connectors_for(tmp_path, target) as loaded:
        yield loaded


def connectors_for(tmp_path: Path, target: Target, **extra: Any) -> Any:  # noqa: F811
    write_manifest(tmp_path / "m", sql_manifest(target.dialect, **extra))
    return _Loaded(tmp_path / "m", {"SHOP_DB_URL": target.url})


class _Loaded:
    def __init__(self, directory: Path, environ: dict[str, str]) -> None:
        self.directory, self.environ = directory, environ
        self.http: aiohttp.ClientSession | None = None
        self.set: ConnectorSet | None = None

    async def __aenter__(self) -> ConnectorSet:
        self.http = aiohttp.ClientSession()
        self.set = await ConnectorSet.load(self.directory, http=self.http, environ=self.environ)
        return self.set

    async def __aexit__(self, *exc: object) -> None:
        assert self.set is not None and self.http is not None
        await self.set.close()
        await self.http.close()


async def call(connectors: ConnectorSet, name: str, args: dict[str, Any]) -> ToolResult:
    tool = connectors.tools.get(name)
    assert tool is not None, connectors.tools.names()
    return await tool.invoke(args)


def rows_of(target: Target) -> list[tuple[Any, ...]]:  # noqa: F811
    with target.admin.connect() as conn:
        from sqlalchemy import text

        return [tuple(r) for r in conn.execute(text("SELECT * FROM items ORDER BY id"))]


async def test_declared_read_and_write(shop: ConnectorSet, target: Target) -> None:  # noqa: F811
    found = await call(shop, "shop__find_item", {"id": 2})
    assert not found.is_error
    assert found.content == "id | name | colour\n2 | beta | green\n(1 row)"
    none = await call(shop, "shop__find_item", {"id": 42})
    assert none.content == "id | name | colour\n(0 rows)"

    renamed = await call(shop, "shop__rename_item", {"id": 2, "name": "b'; DROP TABLE items --"})
    assert renamed.content == "Done: 1 row affected."
    assert rows_of(target)[1] == (2, "b'; DROP TABLE items --", "green")  # a value, not SQL

    bad = await call(shop, "shop__find_item", {"id": "2 OR 1=1"})
    assert bad.is_error and "nothing was sent" in bad.content


async def test_reads_need_no_approval_and_writes_do(shop: ConnectorSet) -> None:
    policies = {name: policy_of(shop.tools.get(name)) for name in shop.tools.names()}  # type: ignore[arg-type]
    assert not policies["shop__find_item"].requires_approval
    assert not policies["shop__query"].requires_approval
    assert policies["shop__rename_item"].requires_approval
    assert policies["shop__rename_item"].risk == "high"


async def test_the_query_action_refuses_every_hostile_statement(
    shop: ConnectorSet,
    target: Target,  # noqa: F811
) -> None:
    before = rows_of(target)
    for sql in COMMON_HOSTILE + DIALECT_HOSTILE[target.dialect]:
        result = await call(shop, "shop__query", {"sql": sql})
        assert result.is_error, sql
        assert result.content.startswith(("Refused", "Invalid arguments")), (sql, result.content)
    assert rows_of(target) == before == [tuple(item) for item in ITEMS]
    assert not target.table_exists("evil")
    pwned = Path("/tmp/chatops-pwned")  # noqa: S108 - what COPY/OUTFILE would write
    assert not pwned.exists()  # noqa: ASYNC240
    works = await call(shop, "shop__query", {"sql": "SELECT name FROM items WHERE id = 1"})
    assert works.content == "name\nalpha\n(1 row)"


async def test_a_write_past_the_checker_is_refused_by_the_read_only_transaction(
    tmp_path: Path,
    target: Target,  # noqa: F811
) -> None:
    """A declared action marked `mutating: false` whose SQL writes runs read-only: the
    database refuses the write. On PostgreSQL and MariaDB a function that writes (its name is
    on no deny list, so the checker passes it) is refused the same way through `query`."""
    sneaky = {"name": "tidy", "description": "looks harmless", "mutating": False,
              "sql": "DELETE FROM items"}  # fmt: skip
    manifest = sql_manifest(target.dialect)
    manifest["actions"].append(sneaky)
    if target.dialect == "postgresql":
        target.execute(
            "CREATE FUNCTION evil_write() RETURNS int LANGUAGE sql VOLATILE AS "
            "'DELETE FROM items RETURNING 1'"
        )
    elif target.dialect == "mysql":
        target.execute(
            "CREATE FUNCTION evil_write() RETURNS INT MODIFIES SQL DATA "
            "BEGIN DELETE FROM items; RETURN 1; END"
        )
    write_manifest(tmp_path / "m", manifest)
    async with _Loaded(tmp_path / "m", {"SHOP_DB_URL": target.url}) as shop:
        assert not policy_of(shop.tools.get("shop__tidy")).requires_approval  # type: ignore[arg-type]
        tidy = await call(shop, "shop__tidy", {})
        assert tidy.is_error
        assert tidy.content.startswith("Refused by the database's read-only transaction")
        if target.dialect != "sqlite":
            sneaky_call = await call(shop, "shop__query", {"sql": "SELECT evil_write()"})
            assert sneaky_call.content.startswith(
                "Refused by the database's read-only transaction"
            ), sneaky_call.content
    assert rows_of(target) == [tuple(item) for item in ITEMS]

    # model-written SQL the checker never saw: PostgreSQL's one-query cursor (DECLARE ... FOR)
    # does not even take a DELETE; MariaDB and SQLite refuse it in the read-only transaction
    database = SqlDatabase(SqlConnector.model_validate(manifest), {"SHOP_DB_URL": target.url})
    refusal = SqlFailed if target.dialect == "postgresql" else ReadOnlyRefused
    try:
        with pytest.raises(refusal):
            database.run("DELETE FROM items", None, read_only=True, max_rows=5)
    finally:
        database.dispose()
    assert rows_of(target) == [tuple(item) for item in ITEMS]


async def test_a_slow_query_is_cut_by_the_statement_timeout(
    shop: ConnectorSet,
    target: Target,  # noqa: F811
) -> None:
    started = time.monotonic()
    slow = await call(shop, "shop__query", {"sql": SLOW[target.dialect]})
    elapsed = time.monotonic() - started
    assert slow.is_error
    assert "statement timeout (1s)" in slow.content, slow.content
    assert elapsed < 20  # the work would take minutes; a loaded machine adds seconds
    again = await call(shop, "shop__find_item", {"id": 1})  # the pooled connection still works
    assert again.content.startswith("id | name | colour\n1 | alpha")


async def test_the_row_cap_cuts_and_says_so(shop: ConnectorSet) -> None:
    cut = await call(shop, "shop__query", {"sql": COUNT_TO.format(500)})
    lines = cut.content.splitlines()
    assert lines[:6] == ["x", "1", "2", "3", "4", "5"]
    assert lines[6] == "(5 rows shown; truncated at 5 rows: more rows exist)"
    exact = await call(shop, "shop__query", {"sql": COUNT_TO.format(5)})
    assert exact.content.splitlines()[-1] == "(5 rows)"


async def test_the_url_and_password_never_appear(
    shop: ConnectorSet, target: Target, tmp_path: Path,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    caplog.set_level(logging.DEBUG)
    echoed = await call(shop, "shop__query", {"sql": f"SELECT '{PASSWORD}' AS leak"})
    failed = await call(shop, "shop__query", {"sql": f'SELECT * FROM "{PASSWORD}"'})
    url_echo = await call(shop, "shop__query", {"sql": f"SELECT '{target.url}' AS leak"})
    assert "[REDACTED]" in url_echo.content
    assert failed.is_error
    if target.dialect != "sqlite":  # a SQLite URL has no password: the whole URL is the secret
        assert echoed.content == "leak\n[REDACTED]\n(1 row)"
    broken_url = target.url.replace("sqlt_", "nosuch_").replace("/test?", "/nosuch_db?")
    if target.dialect == "sqlite":
        broken_url = f"sqlite:///{tmp_path}/no/such/dir/shop.db"
    manifest = sql_manifest(target.dialect)
    write_manifest(tmp_path / "broken", manifest)
    async with _Loaded(tmp_path / "broken", {"SHOP_DB_URL": broken_url}) as broken:
        unreachable = await call(broken, "shop__find_item", {"id": 1})
    assert unreachable.is_error
    secrets = [*target.secrets, broken_url]
    for text in (echoed.content, failed.content, url_echo.content, unreachable.content,
                 caplog.text):  # fmt: skip
        for secret in secrets:
            assert secret not in text, (secret, text)


async def test_calls_run_concurrently_without_sharing_a_transaction(
    shop: ConnectorSet,
    target: Target,  # noqa: F811
) -> None:
    results = await asyncio.gather(
        *(call(shop, "shop__find_item", {"id": i % 3 + 1}) for i in range(12)),
        call(shop, "shop__query", {"sql": "DELETE FROM items"}),
    )
    assert all(not r.is_error for r in results[:-1])
    assert results[-1].is_error
    assert rows_of(target) == [tuple(item) for item in ITEMS]
