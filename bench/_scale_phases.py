"""bench/scale.py's measured phases, each on a started `Cluster`: a burst of mentions, many
runs held in their model call, and approvals clicked on one process or the other.

Times are `time.monotonic()` in this process: the sender's, FakeSlack's `Call.at` and the ops
API's `restarted_at` (the fakes run here). Each phase returns its figures as
{name: (value, unit)}; every wait is bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from pathlib import Path
from typing import Any

import aiohttp

from bench._scale_cluster import (
    Cluster,
    LagPoller,
    counters_when_idle,
    cpu_s,
    percentile,
    read_counters,
    rss_kb,
)
from bench._scale_profile import profiled
from bot.loop_lag import WINDOW_S
from bot.observability.metrics import OTHER, STATEMENT_KINDS
from tests.fakes.slack_api import FakeSlack
from tests.server.serve_process import ServeProcess
from tests.slack.payloads import CHANNEL, as_body, block_actions, mention, signed_headers

Figures = dict[str, tuple[float, str]]
DONE = ":white_check_mark: Done"  # the status message's title once the run has ended well
ENDED = (DONE, ":x: Failed", ":heavy_multiplication_x: Cancelled")
BUSY = "I am busy with many other requests"  # the run manager's notice past its cap
APPROVE = "chatops_approve"  # the card's Approve button (bot.surfaces.slack.cards)
_services = itertools.count(1)
QUIET_S = WINDOW_S + 0.5  # idle this long and /healthz's lag window holds nothing before


async def quiet() -> None:
    """Let the servers' lag window forget what came before the next phase (warm-up, ...)."""
    await asyncio.sleep(QUIET_S)


def progress(fake: FakeSlack) -> tuple[dict[str, float], dict[str, tuple[float, bool]]]:
    """Per thread root: when its first message (the status) was posted, and when its status
    message showed the run ended (and whether it ended done)."""
    first: dict[str, float] = {}
    ended: dict[str, tuple[float, bool]] = {}
    for call in fake.calls():
        if call.method == "chat.postMessage":
            root = call.args.get("thread_ts")
            if root and root not in first:
                first[root] = call.at
        elif call.method == "chat.update":
            said = str(call.args.get("text") or "")
            if said.startswith(ENDED):
                message = fake.messages.get((CHANNEL, str(call.args.get("ts"))), {})
                root = message.get("thread_ts")
                if root and root not in ended:
                    ended[root] = (call.at, said.startswith(DONE))
    return first, ended


async def wait_ended(
    fake: FakeSlack, roots: list[str], timeout_s: float
) -> tuple[dict[str, float], dict[str, tuple[float, bool]]]:
    """Poll (every 0.2 s, at most `timeout_s`) until every root's run has ended."""
    deadline = time.monotonic() + timeout_s
    while True:
        first, ended = progress(fake)
        if all(r in ended for r in roots) or time.monotonic() > deadline:
            return first, ended
        await asyncio.sleep(0.2)


async def post_all(
    http: aiohttp.ClientSession, servers: list[ServeProcess], events: list[dict[str, Any]]
) -> tuple[dict[str, float], list[int]]:
    """Post every event at once, event i to server i mod N; (root -> POST time, statuses)."""
    signed = [(as_body(e), e["event"]["ts"]) for e in events]
    ready = [(body, signed_headers(body), root) for body, root in signed]
    sent: dict[str, float] = {}

    async def one(i: int, body: str, headers: dict[str, str], root: str) -> int:
        url = f"{servers[i % len(servers)].url}/slack/events"
        sent[root] = time.monotonic()
        async with http.post(url, data=body, headers=headers) as response:
            await response.read()
            return response.status

    statuses = await asyncio.gather(*(one(i, *item) for i, item in enumerate(ready)))
    return sent, list(statuses)


async def warm(http: aiohttp.ClientSession, servers: list[ServeProcess], connections: int) -> None:
    """Open `connections` keep-alive connections (spread over the servers) before a burst,
    so the burst measures the server, not N connects at once against its listen backlog."""

    async def one(server: ServeProcess) -> None:
        async with http.get(f"{server.url}/healthz") as response:
            await response.read()

    await asyncio.gather(*(one(servers[i % len(servers)]) for i in range(connections)))


async def warm_up(c: Cluster, http: aiohttp.ClientSession, per_server: int = 5) -> None:
    """A few runs on each server first (bolt's auth.test, pools, lazy imports)."""
    events = [mention(f"warm up {i}") for i in range(per_server * len(c.servers))]
    await post_all(http, c.servers, events)
    await wait_ended(c.slack, [e["event"]["ts"] for e in events], 60)


async def burst(
    c: Cluster, http: aiohttp.ClientSession, mentions: int, *, profile: Path | None = None
) -> Figures:
    """`mentions` signed mentions at once (alternating between the servers; `warm` opened
    the connections), each a run that answers without tools; until every run has ended.
    The work per run: the servers' statements and platform calls (their /metrics before, and
    after once no run is active) and the model's requests (FakeOpenAI's); `profile`: py-spy
    on every server over the burst, its files there (bench/_scale_profile.py)."""
    events = [mention(f"status of service {i}", user=f"U0DEV{i % 7}") for i in range(mentions)]
    roots = [e["event"]["ts"] for e in events]
    counted, asked = await read_counters(http, c.servers), len(c.llm.requests)
    async with profiled(c.name, [s.pid for s in c.servers], profile) as top_frames:
        cpu = sum(cpu_s(s.pid) for s in c.servers)
        async with LagPoller(c.servers) as lag:
            sent, statuses = await post_all(http, c.servers, events)
            first, ended = await wait_ended(c.slack, roots, 60 + mentions * 0.2)
        cpu = sum(cpu_s(s.pid) for s in c.servers) - cpu
    model_calls = len(c.llm.requests) - asked
    after = await counters_when_idle(http, c.servers)
    made = {key: after[key] - counted.get(key, 0.0) for key in after}
    statements = sum(n for key, n in made.items() if key.startswith("db_"))
    to_status = [(first[r] - sent[r]) * 1000 for r in roots if r in first]
    done = [ended[r][0] for r in roots if r in ended and ended[r][1]]
    to_done = [(ended[r][0] - sent[r]) * 1000 for r in roots if r in ended and ended[r][1]]
    span = (max(done) - min(sent.values())) if done else float("nan")
    return {
        "mentions": (mentions, "mentions"),
        "mention_to_first_status_p50": (percentile(to_status, 0.50), "ms"),
        "mention_to_first_status_p99": (percentile(to_status, 0.99), "ms"),
        "runs_per_s": (len(done) / span, "runs/s"),
        "mention_to_done_p50": (percentile(to_done, 0.50), "ms"),
        "mention_to_done_p99": (percentile(to_done, 0.99), "ms"),
        "server_cpu_per_run": (cpu * 1000 / mentions, "ms"),
        "db_statements_per_run": (statements / mentions, "statements"),
        **{
            f"db_{kind}_per_run": (made.get(f"db_{kind}", 0.0) / mentions, "statements")
            for kind in (*STATEMENT_KINDS, OTHER)
        },
        "platform_calls_per_run": (made.get("platform_calls", 0.0) / mentions, "calls"),
        **{
            f"{key}_per_run": (n / mentions, "calls")
            for key, n in sorted(made.items())
            if key.startswith("platform_") and key != "platform_calls" and n
        },
        "model_calls_per_run": (model_calls / mentions, "calls"),
        "runs_not_done": (mentions - len(done), "runs"),
        "no_status": (mentions - len(to_status), "runs"),
        "non_200": (sum(1 for s in statuses if s != 200), "responses"),
        "loop_lag_p99": (lag.worst("p99"), "ms"),
        "loop_lag_max": (lag.worst("max"), "ms"),
        **top_frames,
    }


async def held(c: Cluster, runs: int, *, ramp_s: float = 180.0) -> Figures:
    """`runs` runs at once in one server, each held in its first model call (FakeOpenAI's
    hold) until all are active: the ramp; then a hold of one lag window with all of them
    active (RSS read every 0.5 s); then SIGTERM with them in flight (their release would be
    a herd no real model makes: all answers in the same millisecond)."""
    server = c.servers[0]
    before = rss_kb(server.pid)
    asked = len(c.llm.requests)
    events = [mention(f"status of host {i}", user=f"U0DEV{i % 7}") for i in range(runs)]
    c.llm.hold()
    began, cpu = time.monotonic(), cpu_s(server.pid)
    connector = aiohttp.TCPConnector(limit=100)  # 100 connections: under the listen backlog
    async with aiohttp.ClientSession(connector=connector) as http:
        async with LagPoller([server]) as ramp_lag:
            _, statuses = await post_all(http, [server], events)
            with contextlib.suppress(TimeoutError):  # reported: fewer active than asked
                await c.llm.wait_for_requests(asked + runs, ramp_s)
        active = len(c.llm.requests) - asked
        ramp, cpu = time.monotonic() - began, cpu_s(server.pid) - cpu
        rss = [rss_kb(server.pid)]
        for _ in range(int(QUIET_S / 0.5)):  # the window then holds only this stretch
            await asyncio.sleep(0.5)
            rss.append(rss_kb(server.pid))
        idle = await LagPoller([server]).once(http)
    first, _ = progress(c.slack)
    busy = sum(1 for m in c.slack.messages.values() if BUSY in str(m.get("text")))
    stopping = time.monotonic()
    await server.stop()
    shutdown = time.monotonic() - stopping
    c.llm.release()
    return {
        "held_runs": (runs, "runs"),
        "held_runs_active": (active, "runs"),
        "held_no_status": (sum(1 for e in events if e["event"]["ts"] not in first), "runs"),
        "held_busy_notices": (busy, "runs"),
        "held_non_200": (sum(1 for s in statuses if s != 200), "responses"),
        "held_ramp": (ramp, "s"),
        "held_ramp_server_cpu_per_run": (cpu * 1000 / max(active, 1), "ms"),
        "held_ramp_loop_lag_p99": (ramp_lag.worst("p99"), "ms"),
        "held_ramp_loop_lag_max": (ramp_lag.worst("max"), "ms"),
        "held_rss_before": (before / 1024, "MB"),
        "held_rss_active": (max(rss) / 1024, "MB"),
        "rss_per_active_run": ((max(rss) - before) / max(active, 1), "KB"),
        "held_active_loop_lag_p99": (idle.get("p99", float("nan")), "ms"),
        "held_active_loop_lag_max": (idle.get("max", float("nan")), "ms"),
        "held_shutdown": (shutdown, "s"),
    }


def card_of(fake: FakeSlack, root: str) -> dict[str, Any] | None:
    """The approval card in the thread (a header and the buttons), once posted."""
    for message in fake.thread_messages(CHANNEL, root):
        blocks = message.get("blocks", [])
        header = bool(blocks) and blocks[0].get("type") == "header"
        if header and any(b.get("type") == "actions" for b in blocks):
            return message
    return None


async def decide(
    c: Cluster, http: aiohttp.ClientSession, samples: int, *, other: bool, timeout_s: float
) -> Figures:
    """`samples` runs on server 0 wait for approval of ops__restart; their Approve clicks go,
    0.2 s apart, to server 1 (`other`) or to server 0; each sample: from the click's POST to the
    ops API receiving that restart, at most `timeout_s` (a timed-out one counts as
    `timeout_s`, so the percentiles are then lower bounds)."""
    owner, clicked = c.servers[0], c.servers[1 if other else 0]
    services = [f"svc{next(_services)}" for _ in range(samples)]
    events = [mention(f"restart {s}") for s in services]
    await post_all(http, [owner], events)
    cards = []
    for event in events:  # each bounded; the runs reach their cards meanwhile
        root = event["event"]["ts"]
        cards.append(await c.slack.wait_for(lambda r=root: card_of(c.slack, r), 30))

    clicks: list[int] = []

    async def one(card: dict[str, Any], service: str) -> tuple[float | None, float | None]:
        body = block_actions(card, APPROVE, user="U0LEAD")
        clicked_at = time.monotonic()
        async with http.post(
            f"{clicked.url}/slack/events", data=body, headers=signed_headers(body)
        ) as response:
            await response.read()
            clicks.append(response.status)
        try:
            await c.ops.wait_for(lambda: service in c.ops.restarts, timeout_s)
            resumed = c.ops.restarted_at[c.ops.restarts.index(service)] - clicked_at
        except TimeoutError:
            resumed = None
        edits = [
            x.at
            for x in c.slack.calls("chat.update")
            if x.args.get("ts") == card["ts"] and x.at >= clicked_at
        ]
        return resumed, (min(edits) - clicked_at if edits else None)

    waiting = []
    for card, service in zip(cards, services, strict=True):
        waiting.append(asyncio.create_task(one(card, service)))
        await asyncio.sleep(0.2)
    results = await asyncio.gather(*waiting)
    resumed = [(r if r is not None else timeout_s) * 1000 for r, _ in results]
    decided = [d * 1000 for _, d in results if d is not None]
    where = "other_process" if other else "same_process"
    return {
        f"decide_to_resume_{where}_p50": (percentile(resumed, 0.50), "ms"),
        f"decide_to_resume_{where}_p99": (percentile(resumed, 0.99), "ms"),
        f"decide_to_resume_{where}_timed_out": (sum(r is None for r, _ in results), "samples"),
        f"decide_to_resume_{where}_samples": (samples, "samples"),
        f"click_to_card_decided_{where}_p99": (percentile(decided, 0.99), "ms"),
        f"click_{where}_non_200": (sum(1 for s in clicks if s != 200), "responses"),
    }
