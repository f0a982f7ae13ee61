"""Fixtures for connector tests: the fake HTTP API, a client session, manifest writing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from connectors.http import client_session
from tests.fakes.fixtures import fake_openai  # noqa: F401
from tests.fakes.http_api import FakeHttpApi
from tests.fakes.serving import started

REPO = Path(__file__).resolve().parents[2]
MCP_SERVER_SCRIPT = REPO / "tests" / "fakes" / "mcp_server.py"


@pytest.fixture
async def fake_api() -> AsyncIterator[FakeHttpApi]:
    async with started(FakeHttpApi()) as api:
        yield api


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with client_session() as session:
        yield session


def write_manifest(directory: Path, data: dict[str, Any], filename: str | None = None) -> Path:
    """Write one manifest as YAML into `directory` (created if needed)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / (filename or f"{data['name']}.yaml")
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def point_manifest_at(path: Path, base_url: str) -> None:
    """Rewrite a manifest file's `base_url` (an imported manifest, aimed at the fake API)."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data["base_url"] = base_url
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")


def http_manifest(base_url: str, *actions: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """A minimal HTTP manifest named `api` with the given actions."""
    return {"name": "api", "base_url": base_url, "retry_backoff_s": 0, **extra,
            "actions": list(actions)}  # fmt: skip
