"""MCP servers that were down when the manifests loaded, retried in the background until up.

A server that cannot be started or reached is left out with a warning ("MCP server
unreachable"): its connector's tools are missing, nothing else is. `McpRecovery` owns one task per
such server, retrying with exponential back-off (`RetryPolicy`, capped at `max_delay_s`), and
hands the tools of a server that comes up to `register` (the runtime's tool registry: runs that
start afterwards see them, a run in progress keeps the tools it started with). `close()`
cancels the tasks. `down` says which connectors are down and why, for `/readyz` and the console.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from bot.clock import utcnow
from bot.engine.retry import RetryPolicy
from bot.engine.tools import Tool

if TYPE_CHECKING:  # the MCP SDK is imported only by a bot that has an MCP server
    from connectors.mcp import McpServer, McpUnavailable

log = logging.getLogger(__name__)

FIRST_RETRY_S = 1.0
# The tools of a server that came up: None when registered, else why they were refused.
Register = Callable[[list[Tool]], str | None]


@dataclass
class DownServer:
    """One MCP connector left out: why, since when, and whether it is still being retried."""

    path: Path
    connector: str
    reason: str
    since: datetime
    retrying: bool = True
    attempts: int = 1

    def describe(self) -> str:
        return (
            f"{self.path}: MCP server unreachable: {self.connector!r} {self.reason} "
            f"(connector {self.connector!r} left out)"
        )

    def as_json(self, *, full: bool = True) -> dict[str, object]:
        """For the console (`full`) or `/readyz`, which anyone may read: there the reason
        stops before the server's own words (the last lines of its stderr)."""
        return {
            "connector": self.connector,
            "reason": self.reason if full else self.reason.split(";")[0],
            "since": self.since.isoformat(),
            "attempts": self.attempts,
            "retrying": self.retrying,
        }


class McpRecovery:
    """The servers that are down, and the tasks that bring them back."""

    def __init__(self) -> None:
        self.down: list[DownServer] = []
        self._servers: dict[str, McpServer] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._changed = asyncio.Condition()

    def add(self, path: Path, server: McpServer, problem: McpUnavailable) -> None:
        """A server that failed at load: logged, listed, retried once `start` is called (a
        server that answered with tools it cannot use is not retried)."""
        from connectors.mcp import McpRefused  # loaded by then: there is an MCP server

        entry = DownServer(
            path,
            server.name,
            problem.reason,
            utcnow(),
            retrying=not isinstance(problem, McpRefused),
        )
        self.down.append(entry)
        self._servers[server.name] = server
        log.warning("%s", entry.describe())

    def start(self, register: Register, *, max_delay_s: float) -> None:
        """Retry every server that is down (once; later calls do nothing)."""
        if self._tasks:
            return
        policy = RetryPolicy(base_s=FIRST_RETRY_S, max_s=max_delay_s)
        for entry in self.down:
            if entry.retrying:
                log.warning("MCP server %r: retrying in the background", entry.connector)
                server = self._servers[entry.connector]
                task = asyncio.create_task(
                    self._retry(entry, server, register, policy), name=f"mcp-retry:{server.name}"
                )
                self._tasks.append(task)

    async def _retry(
        self, entry: DownServer, server: McpServer, register: Register, policy: RetryPolicy
    ) -> None:
        from connectors.mcp import McpRefused, McpUnavailable, mcp_tools  # loaded by then

        attempt = 0
        while True:
            await asyncio.sleep(policy.delay(attempt))
            attempt += 1
            entry.attempts += 1
            try:
                tools = await mcp_tools(server)
            except Exception as exc:  # noqa: BLE001 - any failure is one more failed attempt
                if not isinstance(exc, McpUnavailable):
                    log.warning("MCP server %r: %s", server.name, type(exc).__name__)
                    exc = McpUnavailable(server.name, f"failed ({type(exc).__name__})")
                await server.close()
                entry.reason = exc.reason
                if isinstance(exc, McpRefused):
                    await self._ended(entry, retrying=False)
                    log.warning("%s; not retried", entry.describe())
                    return
                log.info("%s; retrying (attempt %d)", entry.describe(), entry.attempts)
                await self._ended(entry, retrying=True)
                continue
            refused = register(tools)
            if refused is not None:
                await server.close()
                entry.reason = refused
                await self._ended(entry, retrying=False)
                log.warning("%s; not retried", entry.describe())
                return
            log.warning("MCP server %r is up: %d tool(s) added", server.name, len(tools))
            async with self._changed:
                self.down.remove(entry)
                self._changed.notify_all()
            return

    async def _ended(self, entry: DownServer, *, retrying: bool) -> None:
        async with self._changed:
            entry.retrying = retrying
            self._changed.notify_all()

    @property
    def tasks(self) -> tuple[asyncio.Task[None], ...]:
        """The retry tasks (one per server being retried); `close()` ends them."""
        return tuple(self._tasks)

    async def wait_until(self, predicate: Callable[[], bool], timeout: float) -> None:  # noqa: ASYNC109
        """Wait for a state of `down` (a server came up, an attempt failed)."""
        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(predicate), timeout)

    async def close(self) -> None:
        """Cancel the retries (the servers themselves are the connector set's to stop)."""
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
