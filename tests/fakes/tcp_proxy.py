"""A TCP proxy on 127.0.0.1 between the bot and PostgreSQL that a test controls, to emulate a
database restart without restarting the shared server: `outage(seconds)` drops every open
connection, refuses new ones (nothing listens) for `seconds`, then accepts again on the same
port. Connections are capped (`max_connections`) and each pump ends with its sockets.
"""

from __future__ import annotations

import asyncio
import contextlib


class TcpProxy:
    """Forwards 127.0.0.1:<port> to `target_host:target_port`."""

    def __init__(self, target_host: str, target_port: int, *, max_connections: int = 200) -> None:
        self.target = (target_host, target_port)
        self.max_connections = max_connections
        self.port = 0
        self.accepted = 0  # connections accepted since start (tests: the bot reconnected)
        self.dropped = 0  # connections cut by `drop_all`
        self._server: asyncio.Server | None = None
        self._pipes: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        """Listen (on a free port the first time, on the same port after an outage)."""
        self._server = await asyncio.start_server(
            self._accept, "127.0.0.1", self.port, reuse_address=True
        )
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        await self._close_listener()
        self.drop_all()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def outage(self, seconds: float) -> None:
        """What a restart looks like from the client: every connection drops, new ones are
        refused for `seconds`, then the server accepts again."""
        await self._close_listener()
        self.drop_all()
        await asyncio.sleep(seconds)  # the outage itself, not synchronisation
        await self.start()

    def drop_all(self) -> None:
        """Cut every open connection at once (both sides see the socket close)."""
        for client, upstream in list(self._pipes):
            for writer in (client, upstream):
                writer.transport.abort()
            self.dropped += 1
        self._pipes.clear()

    async def _close_listener(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if len(self._pipes) >= self.max_connections:
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.wait_for(asyncio.open_connection(*self.target), 5)
        except OSError:
            writer.transport.abort()
            return
        self.accepted += 1
        pipe = (writer, up_writer)
        self._pipes.add(pipe)
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            await asyncio.gather(_pump(reader, up_writer), _pump(up_reader, writer))
        finally:
            self._pipes.discard(pipe)
            self._tasks.discard(task)
            for w in pipe:
                w.transport.abort()


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError, OSError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    writer.transport.abort()  # one side closed: the other goes too, as with a dead server
