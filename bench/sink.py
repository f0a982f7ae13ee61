"""Audit sink: events per second through the outbox, and what the outbox adds to a tool call.

Added latency: the call log's own database work for one tool call (its `started` row with the
start checks, then its completion: `bot.storage.fencing.start_call` and
`bot.storage.calls.complete_call` through `Database.run`, as `hooks/call_log.py` does), with
no sink configured (the same-run baseline) and with an HTTP sink configured (each write then
also queues its event in `audit_outbox`); the two take turns, so machine load hits both alike.
Throughput: that many events queued, then the real sender (`SinkSender`, HTTP sink, HMAC, the
lease, deletes) drains them into a local aiohttp receiver that checks every signature.

    .venv/bin/python bench/sink.py [--calls 400] [--rounds 5] [--events 5000] [--batch 100]
        [--database-url URL]   (default: a fresh SQLite file; PostgreSQL works too)
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import hmac
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import aiohttp  # noqa: E402
from aiohttp import web  # noqa: E402

from bot.audit.sinks.sender import SenderPacing, SinkSender  # noqa: E402
from bot.audit.sinks.targets import SIGNATURE_HEADER, TIMESTAMP_HEADER, HttpSink  # noqa: E402
from bot.storage import outbox  # noqa: E402
from bot.storage.calls import complete_call  # noqa: E402
from bot.storage.database import Database, open_database  # noqa: E402
from bot.storage.fencing import start_call  # noqa: E402
from bot.storage.models import CallLog  # noqa: E402
from bot.storage.outbox import OutboxSinks  # noqa: E402

SECRET = "bench-sink-key"  # noqa: S105 - a bench key


def _row(n: int, tag: str) -> CallLog:
    return CallLog(
        run_id=f"bench-{tag}", tool_call_id=f"call-{n}", platform="bench", channel="C1",
        requester="U1", requesters=["U1"], connector="ops", action="restart",
        tool_name="ops__restart", mutating=True, arguments={"name": "api"},
        fingerprint="f" * 64, approval_status="not_required",
    )  # fmt: skip


async def _calls(db: Database, count: int, tag: str) -> tuple[float, float]:
    """Wall and CPU seconds (the whole process's: the database's worker threads too) for
    `count` tool calls' call-log writes (start, then completion)."""
    began, cpu = time.perf_counter(), time.process_time()
    for n in range(count):
        row = _row(n, tag)
        started = await db.run(start_call, row, None)
        assert started.row is not None
        done = _row(n, tag)
        done.result_status, done.observation, done.duration_ms = "ok", "restarted", 12.0
        await db.run(complete_call, started.row.id or 0, done)
    return time.perf_counter() - began, time.process_time() - cpu


class _Receiver:
    """A SIEM intake on 127.0.0.1: verifies each batch's HMAC, counts the events."""

    def __init__(self) -> None:
        self.events = 0
        self.bad = 0
        self.app = web.Application()
        self.app.router.add_post("/intake", self._intake)

    async def _intake(self, request: web.Request) -> web.Response:
        body = await request.read()
        stamp = request.headers[TIMESTAMP_HEADER].encode()
        mac = hmac.new(SECRET.encode(), stamp + b"." + body, hashlib.sha256).hexdigest()
        if not hmac.compare_digest("sha256=" + mac, request.headers[SIGNATURE_HEADER]):
            self.bad += 1
            return web.Response(status=401)
        self.events += body.count(b"\n")
        return web.Response(status=204)


async def _throughput(db: Database, events: int, batch: int) -> float:
    """Events per second from the outbox into the receiver (events already queued)."""
    receiver = _Receiver()
    runner = web.AppRunner(receiver.app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    async with aiohttp.ClientSession() as http:
        sink = HttpSink(f"http://127.0.0.1:{port}/intake", SECRET, session=http, timeout_s=10)
        sender = SinkSender(db, [sink], holder="bench", pacing=SenderPacing(batch=batch))
        began = time.perf_counter()
        sent = 0
        while sent < events:
            sent += await sender.send_once(sink)
        elapsed = time.perf_counter() - began
        await sender.close()
    await runner.cleanup()
    assert receiver.events == events and receiver.bad == 0, (receiver.events, receiver.bad)
    return events / elapsed


async def _measure(url: str, calls: int, rounds: int, events: int, batch: int) -> None:
    engine = await asyncio.to_thread(open_database, url)
    plain = Database(engine)
    sinked = Database(engine, audit_sinks=OutboxSinks(("http",)))
    try:
        await _calls(plain, 50, "warm-a")
        await _calls(sinked, 50, "warm-b")
        base: list[tuple[float, float]] = []
        with_sink: list[tuple[float, float]] = []
        for r in range(rounds):
            base.append(await _calls(plain, calls, f"base-{r}"))
            with_sink.append(await _calls(sinked, calls, f"sink-{r}"))
        base_ms, base_cpu = (statistics.median(s[i] for s in base) / calls * 1000 for i in (0, 1))
        sink_ms, sink_cpu = (
            statistics.median(s[i] for s in with_sink) / calls * 1000 for i in (0, 1)
        )
        queued = await sinked.run(outbox.pending_events, "http")
        # top the outbox up to `events` (two events per call) and drain it
        extra = max(0, events - queued)
        await _calls(sinked, (extra + 1) // 2, "fill")
        queued = await sinked.run(outbox.pending_events, "http")
        per_second = await _throughput(sinked, queued, batch)
    finally:
        plain.close()
        sinked.close()
        engine.dispose()
    print(f"bench: call_log_writes_per_tool_call_no_sink = {base_ms:.3f} ms")
    print(f"bench: call_log_writes_per_tool_call_with_sink = {sink_ms:.3f} ms")
    print(f"bench: sink_added_latency_per_tool_call = {sink_ms - base_ms:.3f} ms")
    print(f"bench: sink_added_cpu_per_tool_call = {sink_cpu - base_cpu:.3f} ms")
    print(f"bench: sink_events_per_second = {per_second:.0f} events/s ({queued} events)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--events", type=int, default=5000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--database-url", default="")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = args.database_url or f"sqlite:///{tmp}/bench.db"
        asyncio.run(_measure(url, args.calls, args.rounds, args.events, args.batch))


if __name__ == "__main__":
    main()
