"""`chatops serve` freezes what its start-up made (issue 29): the app's runtime, engine and
clients live as long as the process, so a burst's full collections must not walk them again
and again (each was a 50-80 ms pause of the event loop)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp.test_utils import TestServer

from bot.config import Settings
from bot.server import RUNTIME_KEY, create_app, serving_app


@pytest.fixture
def unfrozen_after() -> Iterator[None]:
    yield
    gc.unfreeze()  # the rest of the suite's collections as they were


def settings_for(tmp_path: Path) -> Settings:
    (tmp_path / "manifests").mkdir()
    return Settings(
        _env_file=None,
        database_url=f"sqlite:///{tmp_path / 'chatops.db'}",
        chatops_manifests_dir=tmp_path / "manifests",
    )


def tracked(thing: object) -> bool:
    """Whether the collector still walks `thing` (frozen objects are in no generation)."""
    return any(o is thing for o in gc.get_objects())


async def test_once_started_the_runtime_is_out_of_the_collectors_walks(
    tmp_path: Path, unfrozen_after: None
) -> None:
    app = serving_app(settings_for(tmp_path))
    runtime = app[RUNTIME_KEY]
    assert tracked(runtime)
    async with TestServer(app) as server:
        assert server.started
        assert not tracked(runtime) and not tracked(runtime.db.engine)


async def test_the_app_tests_build_is_left_as_it_is(tmp_path: Path) -> None:
    """Only the serve path freezes: `create_app` alone (every in-process test) does not."""
    app = create_app(settings_for(tmp_path))
    async with TestServer(app):
        assert tracked(app[RUNTIME_KEY])
