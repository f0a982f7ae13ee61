"""Slack ack latency: N concurrent signed `app_mention` events against the running server.

Starts the whole app (`bot.server.create_app`) on 127.0.0.1 with Slack pointed at FakeSlack and
the model at FakeOpenAI (SQLite in a temporary directory); the fakes run in their own process,
as remote as Slack and the model would be. A load generator in a third process opens N
keep-alive connections, then posts N signed events at once. Every event starts a real run
(status message, model call, answer), as in production.

Printed: the ack latency seen by the sender (p50, p99) and events acked per second; the time
inside the server from request to response (p50, p99; what Slack's three seconds and the
DESIGN target are about, free of the load generator's own CPU time); the span in which the
server acked all N; and the sender-side p99 of a bare aiohttp handler that only answers 200
under the same load (the baseline for this machine, measured in the same run).

    python bench/slack_ack.py [--events 200]
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import gc
import json
import multiprocessing
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from multiprocessing.connection import Connection
from pathlib import Path

import aiohttp
from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.config import Settings  # noqa: E402
from bot.server import RUNTIME_KEY, create_app  # noqa: E402
from tests.fakes.openai_server import FakeOpenAI, Turn, answer  # noqa: E402
from tests.fakes.slack_api import BOT_TOKEN, FakeSlack  # noqa: E402
from tests.slack.payloads import SIGNING_SECRET, mention, signed_headers  # noqa: E402

Result = tuple[list[float], float, list[int]]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def serve(app: web.Application) -> tuple[web.AppRunner, str]:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, backlog=4096)  # N connects at once
    await site.start()
    return runner, f"http://127.0.0.1:{runner.addresses[0][1]}"


async def fire(base: str, bodies: list[str]) -> Result:
    """Open one keep-alive connection per body, then post every body at once."""
    connector = aiohttp.TCPConnector(limit=0, force_close=False)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def warm() -> None:
            async with session.get(f"{base}/healthz") as response:
                await response.read()

        await asyncio.gather(*(warm() for _ in bodies))
        signed = [(body, signed_headers(body)) for body in bodies]
        # This process imported the whole app (bot.server and its SDKs): a full collection of
        # that heap mid-burst stalls the sender ~150 ms, which it would then blame on the server.
        gc.collect()
        gc.freeze()

        async def one(body: str, headers: dict[str, str]) -> tuple[float, int]:
            started = time.perf_counter()
            async with session.post(f"{base}/slack/events", data=body, headers=headers) as resp:
                await resp.read()
                return (time.perf_counter() - started) * 1000, resp.status

        started = time.perf_counter()
        results = await asyncio.gather(*(one(b, h) for b, h in signed))
        wall = time.perf_counter() - started
    return [r[0] for r in results], wall, [r[1] for r in results]


def _fire_in_child(base: str, bodies: list[str]) -> Result:
    return asyncio.run(fire(base, bodies))


async def fire_from_another_process(
    pool: concurrent.futures.Executor, base: str, bodies: list[str]
) -> Result:
    return await asyncio.get_running_loop().run_in_executor(pool, _fire_in_child, base, bodies)


def timing_middleware(
    record: list[tuple[float, float]],
) -> Callable[..., Awaitable[web.StreamResponse]]:
    """(start, end) inside the server of each `POST /slack/events` (request to response)."""

    @web.middleware
    async def middleware(request: web.Request, handler: Callable) -> web.StreamResponse:
        started = time.perf_counter()
        response = await handler(request)
        if request.path == "/slack/events":
            record.append((started, time.perf_counter()))
        return response

    return middleware


def _quiet(body: dict) -> Turn:
    return answer("All quiet." if body.get("stream") else "nothing to do")


def _serve_fakes(conn: Connection) -> None:
    """Child process: FakeSlack and FakeOpenAI, as remote as Slack and the model would be."""

    async def run() -> None:
        slack, llm = FakeSlack(), FakeOpenAI()
        await slack.start()
        await llm.start()
        llm.respond_with(_quiet)
        conn.send((slack.url, llm.base_url))
        await asyncio.get_running_loop().run_in_executor(None, conn.recv)  # until told to stop
        await slack.stop()
        await llm.stop()

    asyncio.run(run())


@contextlib.asynccontextmanager
async def remote_fakes() -> AsyncIterator[tuple[str, str]]:
    context = multiprocessing.get_context("spawn")
    here, there = context.Pipe()
    process = context.Process(target=_serve_fakes, args=(there,), daemon=True)
    process.start()
    try:
        yield await asyncio.get_running_loop().run_in_executor(None, here.recv)
    finally:
        here.send("stop")
        await asyncio.get_running_loop().run_in_executor(None, process.join, 10)


async def bench_app(
    pool: concurrent.futures.Executor, events: int
) -> tuple[Result, list[tuple[float, float]]]:
    server_ms: list[tuple[float, float]] = []
    async with remote_fakes() as (slack_url, llm_url):
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / "manifests").mkdir()
            settings = Settings(
                _env_file=None,
                database_url=f"sqlite:///{Path(tmp) / 'bench.db'}",
                chatops_manifests_dir=Path(tmp) / "manifests",
                openai_base_url=llm_url,
                openai_api_key="sk-bench-not-a-secret",
                chatops_llm_max_retries=0,
                slack_bot_token=BOT_TOKEN,
                slack_signing_secret=SIGNING_SECRET,
                slack_api_url=slack_url,
                chatops_max_active_runs_per_user=10_000,  # one person sends every event
            )
            app = create_app(settings)
            app.middlewares.append(timing_middleware(server_ms))
            runner, base = await serve(app)
            try:
                # warm-up: bolt's one auth.test, the first database connection, the child
                await fire_from_another_process(pool, base, [json.dumps(mention("warm up"))])
                await app[RUNTIME_KEY].run_manager.wait_idle(20)  # type: ignore[attr-defined]
                server_ms.clear()
                bodies = [json.dumps(mention(f"status of service {i}")) for i in range(events)]
                result = await fire_from_another_process(pool, base, bodies)
            finally:
                await runner.cleanup()
    return result, server_ms


async def bench_bare(pool: concurrent.futures.Executor, events: int) -> list[float]:
    async def ok(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(text="")

    app = web.Application()
    app.router.add_post("/slack/events", ok)
    app.router.add_get("/healthz", ok)
    runner, base = await serve(app)
    try:
        bodies = [json.dumps(mention(f"status of service {i}")) for i in range(events)]
        latencies, _, _ = await fire_from_another_process(pool, base, bodies)
    finally:
        await runner.cleanup()
    return latencies


async def main(events: int) -> int:
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=context) as pool:
        (latencies, wall, statuses), server_ms = await bench_app(pool, events)
        baseline = await bench_bare(pool, events)
    failed = sum(1 for s in statuses if s != 200)
    inside = [(end - start) * 1000 for start, end in server_ms]
    span = max(end for _, end in server_ms) - min(start for start, _ in server_ms)
    p99, base_p99 = percentile(latencies, 0.99), percentile(baseline, 0.99)
    print(f"bench: slack_ack_events = {events} events")
    print(f"bench: slack_ack_p50 = {percentile(latencies, 0.50):.1f} ms")
    print(f"bench: slack_ack_p99 = {p99:.1f} ms")
    print(f"bench: slack_ack_server_p50 = {percentile(inside, 0.50):.2f} ms")
    print(f"bench: slack_ack_server_p99 = {percentile(inside, 0.99):.2f} ms")
    print(f"bench: slack_events_per_second = {events / wall:.0f} events/s")
    print(f"bench: slack_server_ack_span = {span * 1000:.0f} ms")
    print(f"bench: slack_server_events_per_second = {events / span:.0f} events/s")
    print(f"bench: bare_aiohttp_ack_p99 = {base_p99:.1f} ms")
    print(f"bench: slack_ack_p99_vs_bare_aiohttp = {p99 / base_p99:.2f} x")
    print(f"bench: slack_ack_non_200 = {failed} responses")
    return 0 if failed == 0 else 1


def cli() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200)
    args = parser.parse_args()
    return asyncio.run(main(args.events))


if __name__ == "__main__":
    raise SystemExit(cli())
