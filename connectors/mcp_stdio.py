"""A stdio MCP server this process starts and owns, as an `mcp` client transport.

The SDK's own stdio transport hides the process: a server that exits at once is only a
"Connection closed", its stderr goes to our terminal, and a line it prints on stdout that is not
JSON-RPC becomes an SDK traceback. This transport keeps the process, so a server that dies says
why (its exit status and the last lines of its stderr, which are otherwise logged at DEBUG), and
turns a stray stdout line into one warning. Whatever the server writes is redacted (`secrets`)
before it is kept or logged: a server may print the token it was given. It speaks the same
framing (one JSON-RPC message per line) and stops the server as the MCP specification says:
close its stdin, wait, then terminate its process group, then kill it.
"""

from __future__ import annotations

import logging
import os
import signal
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass

import anyio
from anyio.abc import Process
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from anyio.streams.text import TextReceiveStream
from mcp.client import Transport
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage
from mcp_types import jsonrpc_message_adapter

from bot.redaction import redact_text

log = logging.getLogger(__name__)

STDERR_LINES_KEPT = 20
STDIN_CLOSED_GRACE_S = 2.0  # the server exits by itself once its stdin closes
TERMINATE_GRACE_S = 2.0  # then SIGTERM; SIGKILL after this
STDERR_DRAIN_S = 1.0  # after the exit, its last stderr lines
_STRAY_LINE_CHARS = 200


@dataclass(frozen=True)
class ServerExit:
    """How a server process ended: its status (negative: killed by that signal) and the last
    lines it wrote on stderr."""

    status: int
    stderr: tuple[str, ...]

    def describe(self) -> str:
        if self.status < 0:
            how = f"was killed by signal {-self.status}"
        else:
            how = f"exited with status {self.status}"
        if not self.stderr:
            return f"{how} (nothing on stderr)"
        return f"{how}; the last lines of its stderr: " + " | ".join(self.stderr)


class StdioServerProcess:
    """One run of a stdio server: `transport()` starts it; `exit` says how it ended."""

    def __init__(
        self,
        command: Sequence[str],
        *,
        name: str,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        secrets: Callable[[], Iterable[str]] = lambda: (),
    ) -> None:
        """`secrets`: the values to mask in what the server writes before it is logged."""
        self.command = list(command)
        self._secrets = secrets
        self.name = name
        self.env = {**get_default_environment(), **(env or {})}
        self.cwd = cwd
        self._stderr: deque[str] = deque(maxlen=STDERR_LINES_KEPT)
        self._process: Process | None = None
        self._stderr_done: anyio.Event | None = None

    @property
    def exit(self) -> ServerExit | None:
        """None while the process runs (or before it started)."""
        if self._process is None or self._process.returncode is None:
            return None
        return ServerExit(self._process.returncode, tuple(self._stderr))

    def transport(self) -> Transport:
        return self._connect()  # type: ignore[return-value]

    @asynccontextmanager
    async def _connect(
        self,
    ) -> AsyncIterator[
        tuple[MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream]
    ]:
        process = await anyio.open_process(
            self.command, env=self.env, cwd=self.cwd, start_new_session=True
        )
        self._process = process
        self._stderr_done = anyio.Event()
        read_in, read_out = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        write_in, write_out = anyio.create_memory_object_stream[SessionMessage](0)
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(self._read_stdout, process, read_in)
            tasks.start_soon(self._write_stdin, process, write_out, read_in)
            tasks.start_soon(self._read_stderr, process)
            try:
                yield read_out, write_in
            finally:
                with anyio.CancelScope(shield=True):
                    await self._stop(process)
                    with anyio.move_on_after(STDERR_DRAIN_S):
                        await self._stderr_done.wait()  # its last lines, for `exit`
                for stream in (read_in, read_out, write_in, write_out):
                    await stream.aclose()
                tasks.cancel_scope.cancel()

    async def _read_stdout(
        self, process: Process, into: MemoryObjectSendStream[SessionMessage | Exception]
    ) -> None:
        assert process.stdout is not None
        buffer = ""
        with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            async with into:
                async for chunk in TextReceiveStream(process.stdout, errors="replace"):
                    lines = (buffer + chunk).split("\n")
                    buffer = lines.pop()
                    for line in lines:
                        if line.strip():
                            message = self._parse(line)
                            if message is not None:
                                await into.send(message)

    def _parse(self, line: str) -> SessionMessage | None:
        try:
            return SessionMessage(jsonrpc_message_adapter.validate_json(line, by_name=False))
        except ValueError:
            shown = redact_text(line.strip(), list(self._secrets()))[:_STRAY_LINE_CHARS]
            log.warning("MCP server %s wrote a line that is not JSON-RPC: %s", self.name, shown)
            return None

    async def _write_stdin(
        self,
        process: Process,
        source: MemoryObjectReceiveStream[SessionMessage],
        replies: MemoryObjectSendStream[SessionMessage | Exception],
    ) -> None:
        assert process.stdin is not None
        try:
            async with source:
                async for message in source:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await process.stdin.send((data + "\n").encode())
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await replies.aclose()  # the session sees the connection end, not a hung request

    async def _read_stderr(self, process: Process) -> None:
        assert process.stderr is not None
        buffer = ""
        try:
            with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                async for chunk in TextReceiveStream(process.stderr, errors="replace"):
                    lines = (buffer + chunk).split("\n")
                    buffer = lines.pop()
                    for line in lines:
                        self._keep(line)
            self._keep(buffer)
        finally:
            if self._stderr_done is not None:
                self._stderr_done.set()

    def _keep(self, line: str) -> None:
        line = redact_text(line.rstrip(), list(self._secrets()))
        if line:
            self._stderr.append(line)
            log.debug("MCP server %s stderr: %s", self.name, line)

    async def _stop(self, process: Process) -> None:
        """Close stdin, wait; SIGTERM to its process group, wait; SIGKILL (all bounded)."""
        if process.stdin is not None:
            with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                await process.stdin.aclose()
        for sig, grace in ((None, STDIN_CLOSED_GRACE_S), (signal.SIGTERM, TERMINATE_GRACE_S),
                           (signal.SIGKILL, TERMINATE_GRACE_S)):  # fmt: skip
            if sig is not None and process.returncode is None:
                with suppress(ProcessLookupError, PermissionError):
                    os.killpg(process.pid, sig)
            if await _exited(process, grace):
                return
        log.warning("MCP server %s (pid %d) is still alive after SIGKILL", self.name, process.pid)


async def _exited(process: Process, within_s: float) -> bool:
    """Has the process ended within the time? (`wait()` also waits for its pipes, which a
    child it left behind may hold: the next step signals the whole process group.)"""
    with anyio.move_on_after(within_s):
        await process.wait()
    return process.returncode is not None
