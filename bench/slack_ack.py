"""Slack ack latency: N concurrent signed `app_mention` events against the running server.

Starts the whole app (`bot.server.create_app`) on 127.0.0.1 with Slack pointed at FakeSlack and
the model at FakeOpenAI (SQLite in a temporary directory), posts N signed events at once, and
prints the ack latency p50/p99 and the events acknowledged per second. Every event starts a
real run (status message, model call, answer), which keeps running while later events are
acked, as in production. For scale, the same requests against a bare aiohttp handler that only
answers 200 give a baseline measured in the same run.

    python bench/slack_ack.py [--events 200]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.config import Settings  # noqa: E402
from bot.server import RUNTIME_KEY, create_app  # noqa: E402
from tests.fakes.openai_server import FakeOpenAI, answer  # noqa: E402
from tests.fakes.slack_api import BOT_TOKEN, FakeSlack  # noqa: E402
from tests.slack.payloads import SIGNING_SECRET, mention, signed_headers  # noqa: E402


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def serve(app: web.Application) -> tuple[web.AppRunner, str]:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, f"http://127.0.0.1:{runner.addresses[0][1]}"


async def fire(url: str, bodies: list[str]) -> tuple[list[float], float, list[int]]:
    """Post every body at once; per-request latency (ms), total wall time (s), statuses."""
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def one(body: str) -> tuple[float, int]:
            headers = signed_headers(body)
            started = time.perf_counter()
            async with session.post(url, data=body, headers=headers) as response:
                await response.read()
                return (time.perf_counter() - started) * 1000, response.status

        started = time.perf_counter()
        results = await asyncio.gather(*(one(b) for b in bodies))
        wall = time.perf_counter() - started
    return [r[0] for r in results], wall, [r[1] for r in results]


async def bare_baseline(bodies: list[str]) -> list[float]:
    async def ok(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(text="")

    app = web.Application()
    app.router.add_post("/slack/events", ok)
    runner, base = await serve(app)
    try:
        latencies, _, _ = await fire(f"{base}/slack/events", bodies)
    finally:
        await runner.cleanup()
    return latencies


async def main(events: int) -> int:
    slack, llm = FakeSlack(), FakeOpenAI()
    await slack.start()
    await llm.start()
    llm.respond_with(lambda body: answer("All quiet." if body.get("stream") else "nothing to do"))
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(
            _env_file=None,
            database_url=f"sqlite:///{Path(tmp) / 'bench.db'}",
            chatops_manifests_dir=Path(tmp) / "manifests",
            openai_base_url=llm.base_url,
            openai_api_key="sk-bench-not-a-secret",
            chatops_llm_max_retries=0,
            slack_bot_token=BOT_TOKEN,
            slack_signing_secret=SIGNING_SECRET,
            slack_api_url=slack.url,
        )
        (Path(tmp) / "manifests").mkdir()
        app = create_app(settings)
        runner, base = await serve(app)
        try:
            # warm-up: bolt's one auth.test and the first database connection
            await fire(f"{base}/slack/events", [json.dumps(mention("warm up"))])
            bodies = [json.dumps(mention(f"status of service {i}")) for i in range(events)]
            latencies, wall, statuses = await fire(f"{base}/slack/events", bodies)
            drained = True
            try:
                await app[RUNTIME_KEY].run_manager.wait_idle(40)  # type: ignore[attr-defined]
            except TimeoutError:
                drained = False
        finally:
            await runner.cleanup()
            await slack.stop()
            await llm.stop()
    baseline = await bare_baseline(bodies)
    failed = sum(1 for s in statuses if s != 200)
    p50, p99 = percentile(latencies, 0.50), percentile(latencies, 0.99)
    base_p99 = percentile(baseline, 0.99)
    print(f"bench: slack_ack_events = {events} events")
    print(f"bench: slack_ack_p50 = {p50:.1f} ms")
    print(f"bench: slack_ack_p99 = {p99:.1f} ms")
    print(f"bench: slack_ack_max = {max(latencies):.1f} ms")
    print(f"bench: slack_events_per_second = {events / wall:.0f} events/s")
    print(f"bench: bare_aiohttp_ack_p99 = {base_p99:.1f} ms")
    print(f"bench: slack_ack_p99_vs_bare_aiohttp = {p99 / base_p99:.2f} x")
    print(f"bench: slack_ack_non_200 = {failed} responses")
    print(f"bench: runs_drained = {'yes' if drained else 'no'}")
    return 0 if failed == 0 else 1


def cli() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200)
    args = parser.parse_args()
    return asyncio.run(main(args.events))


if __name__ == "__main__":
    raise SystemExit(cli())
