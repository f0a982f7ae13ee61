"""Start a fake server for the length of a block: every fake has `start()` and `stop()`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Protocol, TypeVar


class Startable(Protocol):
    async def start(self) -> None: ...

    async def stop(self) -> None: ...


S = TypeVar("S", bound=Startable)


@asynccontextmanager
async def started(server: S) -> AsyncIterator[S]:
    """`async with started(FakeSlack()) as fake:` the fake runs inside, and is stopped after."""
    await server.start()
    try:
        yield server
    finally:
        await server.stop()
