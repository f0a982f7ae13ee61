"""The faults of a real deployment, each injected into a `Cluster` around a few conversations
of its own and recovered from, bounded. A fault kind is an async function `(cluster, rng)`;
`FAULTS` names them for bench/faults.py's random schedule. A new kind is one more function
and one more entry.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from tests.fakes.openai_server import Turn, broken_stream, reset, stalled
from tests.faults.cluster import Cluster, Conversation

Fault = Callable[[Cluster, random.Random], Awaitable[None]]
FAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")


async def _mentions(cluster: Cluster, rng: random.Random, count: int) -> list[Conversation]:
    sides = [rng.randrange(len(cluster.processes)) for _ in range(count)]
    sent = [await cluster.mention(side) for side in sides]
    return [conv for conv in sent if conv is not None]


def _other(cluster: Cluster, rng: random.Random) -> int:
    return rng.randrange(len(cluster.processes))


async def _carded(cluster: Cluster, convs: list[Conversation]) -> list[Conversation]:
    """The conversations whose card is up (the others ended already, e.g. failed under the
    fault: their outcome is in the thread)."""
    return [conv for conv in convs if await cluster.wait_card(conv)]


async def _approved_in_flight(cluster: Cluster, rng: random.Random, convs: list[Conversation]):
    """Approve `convs` with the ops API holding its answers; returns once one call is in."""
    cluster.ops.hold()
    before = len(cluster.ops.restarts)
    await asyncio.gather(*(cluster.approve(c, _other(cluster, rng)) for c in convs))
    await cluster.ops.wait_for(lambda: len(cluster.ops.restarts) > before, 30)


async def kill_backends(cluster: Cluster, rng: random.Random) -> None:
    """`pg_terminate_backend` of the processes' own sessions while the model thinks, and again
    while the approved calls are in flight at the ops API."""
    asked = len(cluster.llm.requests)
    cluster.llm.hold()
    convs = await _mentions(cluster, rng, 2)
    await cluster.llm.wait_for_requests(asked + len(convs), 30)
    cluster.terminate_backends()
    cluster.llm.release()
    carded = await _carded(cluster, convs)
    if carded:
        await _approved_in_flight(cluster, rng, carded)
        cluster.terminate_backends()
        cluster.ops.release()
    cluster.injected["pg_terminate_backend"] += 2


async def restart_database(cluster: Cluster, rng: random.Random) -> None:
    """PostgreSQL "restarts" (the proxy drops every connection and refuses new ones, for up
    to longer than the lease) while one approved call is in flight, a mention arrives and a card
    is clicked."""
    convs = await _carded(cluster, await _mentions(cluster, rng, 2))
    if convs:
        await _approved_in_flight(cluster, rng, convs[:1])
    # up to one and a half leases: a lease may lapse meanwhile (the database's clock goes on),
    # and the process that first reaches the database again may adopt the other's runs
    outage = asyncio.create_task(cluster.proxy.outage(cluster.lease_s * rng.uniform(0.3, 1.5)))
    await asyncio.sleep(0.5)
    cluster.ops.release()
    during = [cluster.mention(_other(cluster, rng))]
    during += [cluster.approve(conv, _other(cluster, rng)) for conv in convs[1:]]
    late = (await asyncio.gather(*during))[0]
    await outage
    if late is not None and await cluster.wait_card(late):
        await cluster.approve(late, _other(cluster, rng))
    cluster.injected["postgres_restart"] += 1


async def pause_past_lease(cluster: Cluster, rng: random.Random) -> None:
    """The owner of a run waiting for its approval is SIGSTOPped for twice the lease: another
    process adopts the run; the click reaches the adopter, then (after SIGCONT) the old owner."""
    if len(cluster.processes) < 2:
        return
    owner = _other(cluster, rng)
    adopter = (owner + 1) % len(cluster.processes)
    conv = await cluster.mention(owner)
    assert conv is not None
    assert await cluster.wait_card(conv), "the card never came"
    run_id = await waiting_run(cluster, conv)
    click = await cluster.approval(conv)  # the same click reaches both
    cluster.signal(owner, signal.SIGSTOP)
    try:
        await cluster.processes[adopter].wait_log(f"adopted run {run_id}", cluster.lease_s * 10)
        await cluster.click(adopter, click)
    finally:
        cluster.signal(owner, signal.SIGCONT)
    await cluster.click(owner, click)
    cluster.injected["sigstop_past_lease"] += 1


async def skewed_clock(cluster: Cluster, rng: random.Random) -> None:
    """One process is restarted with its wall clock a minute ahead (libfaketime): the other's
    live leases are not lapsed to it (leases go by the database's clock). Runs start on each
    process and each card is approved on both."""
    if len(cluster.processes) < 2 or not FAKETIME.exists():  # noqa: ASYNC240 - a stat
        return
    skew = {"LD_PRELOAD": str(FAKETIME), "FAKETIME": "+60s", "FAKETIME_DONT_FAKE_MONOTONIC": "1"}
    await cluster.restart(_other(cluster, rng), **skew)
    convs = await _carded(cluster, [c for c in await _mentions_on_each(cluster) if c])
    await asyncio.gather(*(cluster.approve(conv, 0, 1) for conv in convs))
    cluster.injected["clock_skew"] += 1


async def stalled_heartbeat(cluster: Cluster, rng: random.Random) -> None:
    """The heartbeat of a run's owner blocks on its locked process row past the lease while the
    process goes on serving: the other process adopts the run; the click reaches the stalled
    owner first (it must not run the tool: it lost the run), then the adopter. A mention that
    reaches the stalled process meanwhile gets its outcome too."""
    if len(cluster.processes) < 2:
        return
    owner = _other(cluster, rng)
    adopter = (owner + 1) % len(cluster.processes)
    conv = await cluster.mention(owner)
    assert conv is not None
    assert await cluster.wait_card(conv), "the card never came"
    run_id = await waiting_run(cluster, conv)
    async with cluster.heartbeat_stalled(owner):
        await cluster.processes[adopter].wait_log(f"adopted run {run_id}", cluster.lease_s * 10)
        late = await cluster.mention(owner)
        await cluster.approve(conv, owner, adopter)
    if late is not None and await cluster.wait_card(late):
        await cluster.approve(late, owner)
    cluster.injected["stalled_heartbeat"] += 1


async def _mentions_on_each(cluster: Cluster) -> list[Conversation | None]:
    return [await cluster.mention(side) for side in range(len(cluster.processes))]


async def waiting_run(cluster: Cluster, conv: Conversation) -> str:
    """The id of the conversation's run once it waits for its approval (its card recorded:
    a pause before that would post the card again)."""
    from tests.faults.invariants import mentions, read_rows

    for _ in range(100):
        runs, _ = await asyncio.to_thread(read_rows, cluster.database_url)
        run = next((r for r in runs if mentions(conv.service)(r.query)), None)
        if run is not None and run.status == "waiting_approval":
            return run.id
        await asyncio.sleep(0.1)
    raise AssertionError(f"{conv.service}: the run never waited for its approval")


async def slack_errors(cluster: Cluster, rng: random.Random) -> None:
    """Slack answers bursts of 5xx and 429 (with Retry-After) to posts and edits."""
    for method in ("chat.postMessage", "chat.update"):
        cluster.slack.fail_next(method, status=rng.choice((500, 502, 503)), count=3)
        cluster.slack.fail_next(method, status=429, headers={"Retry-After": "1"}, count=3)
    for conv in await _carded(cluster, await _mentions(cluster, rng, 2)):
        await cluster.approve(conv, _other(cluster, rng))
    cluster.injected["slack_5xx_429"] += 2


async def model_faults(cluster: Cluster, rng: random.Random) -> None:
    """After an approved call ran, the model times out, resets the connection, or cuts the
    answer's stream short (one conversation each)."""
    after_tool = lambda body: not body.get("stream") and _has_tool_result(body)  # noqa: E731
    streaming = lambda body: bool(body.get("stream"))  # noqa: E731
    faults = [(after_tool, stalled()), (after_tool, reset())]
    faults.append((streaming, broken_stream("svc is almost b", after=1)))
    for when, fault in rng.sample(faults, len(faults)):
        conv = await cluster.mention(_other(cluster, rng))
        if conv is not None and await cluster.wait_card(conv):
            once(cluster, conv, when, fault)
            await cluster.approve(conv, _other(cluster, rng))
    cluster.injected["model_timeout_reset"] += len(faults)


def _has_tool_result(body: dict[str, Any]) -> bool:
    return any(m["role"] == "tool" for m in body["messages"])


def once(
    cluster: Cluster, conv: Conversation, when: Callable[[dict[str, Any]], bool], fault: Turn
) -> None:
    """The first model request of `conv` for which `when(body)` holds gets `fault`."""
    taken: list[bool] = []

    def matches(body: dict[str, Any]) -> bool:
        users = " ".join(str(m.get("content")) for m in body["messages"] if m["role"] == "user")
        return not taken and conv.service in users.split() and when(body)

    def answer(_: dict[str, Any]) -> Turn:
        taken.append(True)
        return fault

    cluster.llm.answer_when(matches, answer)


async def mcp_dies(cluster: Cluster, rng: random.Random) -> None:
    """The MCP server is killed while an approved call is in flight on it."""
    conv = await cluster.mention(_other(cluster, rng), via_mcp=True)
    if conv is None or not await cluster.wait_card(conv):
        return
    await cluster.approve(conv, _other(cluster, rng))
    for _ in range(300):
        if cluster.mcp_calls.exists() and conv.service in cluster.mcp_calls.read_text():
            break
        await asyncio.sleep(0.1)
    else:
        return  # the call never reached the server (the run ended otherwise)
    line = next(x for x in cluster.mcp_calls.read_text().splitlines() if conv.service in x)
    os.kill(int(line.split()[1]), signal.SIGKILL)
    cluster.injected["mcp_server_killed"] += 1


FAULTS: dict[str, Fault] = {
    "pg_terminate_backend": kill_backends,
    "postgres_restart": restart_database,
    "sigstop_past_lease": pause_past_lease,
    "clock_skew": skewed_clock,
    "stalled_heartbeat": stalled_heartbeat,
    "slack_5xx_429": slack_errors,
    "model_timeout_reset": model_faults,
    "mcp_server_killed": mcp_dies,
}
