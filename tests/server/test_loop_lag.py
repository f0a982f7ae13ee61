"""The loop-lag monitor sees a blocked event loop, and `/healthz` reports it (`loop_lag_ms`)."""

from __future__ import annotations

import asyncio
import time

from bot.loop_lag import LoopLag
from bot.server import LOOP_LAG_KEY, RUNTIME_KEY, create_app


async def test_a_blocked_loop_shows_as_lag() -> None:
    monitor = LoopLag(interval_s=0.01, window_s=5.0)
    monitor.start()
    try:
        await asyncio.sleep(0.1)  # a few samples of an idle loop
        idle = monitor.summary()
        time.sleep(0.2)  # noqa: ASYNC251 - blocking the loop is the point (wakes ~200 ms late)
        await asyncio.sleep(0.05)
        blocked = monitor.summary()
    finally:
        await monitor.stop()
    assert idle["samples"] >= 3
    assert idle["max"] < 150
    assert blocked["max"] >= 150
    assert blocked["p50"] < 150  # one late wake-up among the idle ones
    assert blocked["samples"] > idle["samples"]


async def test_samples_older_than_the_window_are_left_out() -> None:
    now = [100.0]
    monitor = LoopLag(interval_s=0.05, window_s=10.0, clock=lambda: now[0])
    assert monitor.summary() == {"p50": 0.0, "p99": 0.0, "max": 0.0, "samples": 0}
    monitor._samples.extend([(95.0, 500.0), (99.0, 1.0), (100.0, 3.0)])
    assert monitor.summary()["max"] == 500.0
    now[0] = 106.0  # the 500 ms sample is now 11 s old
    assert monitor.summary() == {"p50": 1.0, "p99": 3.0, "max": 3.0, "samples": 2}


async def test_healthz_reports_the_loop_lag(aiohttp_client, make_settings) -> None:
    app = create_app(make_settings())
    client = await aiohttp_client(app)
    await app[RUNTIME_KEY].recovery.wait(30)
    await asyncio.sleep(0.3)  # a few samples at 50 ms
    body = await (await client.get("/healthz")).json()
    assert body["ok"] is True
    lag = body["loop_lag_ms"]
    assert set(lag) == {"p50", "p99", "max", "samples"}
    assert lag["samples"] >= 2
    assert 0 <= lag["p50"] <= lag["p99"] <= lag["max"] < 1000

    time.sleep(0.2)  # noqa: ASYNC251 - the app's own loop, blocked on purpose
    await asyncio.sleep(0.1)
    blocked = (await (await client.get("/healthz")).json())["loop_lag_ms"]
    assert blocked["max"] >= 150
    assert app[LOOP_LAG_KEY].summary()["max"] >= 150
