"""The fault suite runs on PostgreSQL only (several processes share one database): each test
gets a private empty schema (its processes migrate it, as a deployment's do), skipped with the
reason when the server is unreachable."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy.exc import OperationalError

from bot.storage.database import safe_database_url
from tests.databases import POSTGRES_ADMIN_URL, PostgresSchemas, schema_url
from tests.fakes.fixtures import fake_openai  # noqa: F401


@pytest.fixture
def database_url(postgres_schemas: PostgresSchemas) -> Iterator[str]:
    try:
        schema = postgres_schemas.create()
    except OperationalError as exc:
        where = safe_database_url(POSTGRES_ADMIN_URL)
        pytest.skip(f"the fault suite needs PostgreSQL at {where}: {type(exc.orig).__name__}")
    try:
        yield schema_url(schema)
    finally:
        postgres_schemas.drop(schema)


@pytest.fixture
def admin_url() -> str:
    return POSTGRES_ADMIN_URL
