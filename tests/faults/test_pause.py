"""Faults of the leases between two serve processes, each with clicks on each process:

- a process frozen (`SIGSTOP`) for longer than its lease while it owns a run waiting for its
  approval: the other adopts the run, the click reaches the adopter, then (after `SIGCONT`)
  the woken owner;
- a heartbeat stalled (its `bot_process` row locked) past the lease while its process serves:
  the other adopts the run; the click reaches the stalled owner, then the adopter;
- the same while the owner streams its answer: its streamed message says it was cut short;
- the same while the owner posts its finished answer: it finishes the post, the adopter waits;
- a process restarted with its clock a minute ahead: it takes no live run of the other.

Each restart runs once, and each conversation gets one outcome."""

from __future__ import annotations

import random
from datetime import timedelta
from pathlib import Path

import pytest

from bot.clock import as_utc, utcnow
from bot.storage.models import Approval
from tests.databases import rows
from tests.fakes.openai_server import held_stream
from tests.faults.cluster import cluster
from tests.faults.invariants import ANSWERED
from tests.faults.kinds import (
    FAKETIME,
    once,
    pause_past_lease,
    skewed_clock,
    stalled_heartbeat,
    waiting_run,
)


async def test_owner_paused_past_its_lease(
    tmp_path: Path, database_url: str, admin_url: str
) -> None:
    async with cluster(tmp_path, database_url, admin_url) as deployment:
        await pause_past_lease(deployment, random.Random(3))
        verdict = await deployment.verdict()
        verdict.raise_if_broken()
        assert verdict.pending == 0 and deployment.executed() == {"svc-1": 1}


async def test_heartbeat_stalled_while_its_process_serves(
    tmp_path: Path, database_url: str, admin_url: str
) -> None:
    async with cluster(tmp_path, database_url, admin_url) as deployment:
        await stalled_heartbeat(deployment, random.Random(5))
        verdict = await deployment.verdict()
        verdict.raise_if_broken()
        assert verdict.pending == 0 and deployment.injected["stalled_heartbeat"] == 1
        assert deployment.executed() == {"svc-1": 1, "svc-2": 1}
        # the stalled owner noticed (its late beat, or its fenced start) and let the run go
        assert any("lets it go" in line for p in deployment.processes for line in p.log)


@pytest.mark.skipif(not FAKETIME.exists(), reason=f"clock skew needs libfaketime at {FAKETIME}")
async def test_clock_skew_between_processes(
    tmp_path: Path, database_url: str, admin_url: str
) -> None:
    """No adoption at all: leases go by the database's clock. The lease is 10 s, not 3: a
    loaded machine may starve a process for 3 s (a real lapse, rightly adopted), while a lease
    judged by the skewed host's clock would still lapse at once (the skew is 60 s)."""
    async with cluster(tmp_path, database_url, admin_url, lease_s=10.0) as deployment:
        await skewed_clock(deployment, random.Random(6))
        verdict = await deployment.verdict()
        verdict.raise_if_broken()
        assert verdict.pending == 0 and deployment.injected["clock_skew"] == 1
        assert deployment.executed() == {"svc-1": 1, "svc-2": 1}
        assert not any("adopted run" in line for p in deployment.processes for line in p.log)
        # the skewed process asked its approval in the database's time, not its own
        asked = [as_utc(row.created_at) for row in rows(deployment.database_url, Approval)]
        assert len(asked) == 2 and all(at < utcnow() + timedelta(seconds=5) for at in asked)
        assert any(
            "ahead of the database's" in line for p in deployment.processes for line in p.log
        )


async def test_heartbeat_stalled_while_the_answer_streams(
    tmp_path: Path, database_url: str, admin_url: str
) -> None:
    """The owner has streamed the whole answer into the thread (its stream not yet finished)
    when its heartbeat stalls past the lease: the other process adopts the run and answers.
    The owner's streamed message then says it was cut short: the thread has one answer."""
    slow = {"CHATOPS_LLM_TIMEOUT_S": "60"}  # the held stream is not the model's timeout
    async with cluster(tmp_path, database_url, admin_url, extra_env=slow) as deployment:
        conv = await deployment.mention(0)
        assert conv is not None and await deployment.wait_card(conv)
        run_id = await waiting_run(deployment, conv)
        streaming = lambda body: bool(body.get("stream"))  # noqa: E731
        once(
            deployment,
            conv,
            streaming,
            held_stream(f"{conv.service} {ANSWERED}. All good.", after=2),
        )
        await deployment.approve(conv, 0)
        shown = lambda: any(ANSWERED in t for t in deployment.slack_texts(conv))  # noqa: E731
        await deployment.slack.wait_for(shown, 30)
        async with deployment.heartbeat_stalled(0):
            await deployment.processes[1].wait_log(f"adopted run {run_id}", 30)
        await deployment.processes[0].wait_log("lets it go", 30)
        deployment.llm.release_stream()
        verdict = await deployment.verdict()
        verdict.raise_if_broken()
        assert verdict.pending == 0 and deployment.executed() == {conv.service: 1}


async def test_heartbeat_stalled_while_the_answer_posts(
    tmp_path: Path, database_url: str, admin_url: str
) -> None:
    """The owner is posting its finished answer (Slack has not yet answered the end of its
    stream) when its heartbeat stalls past the lease: it lets the run go, yet finishes the post
    and records it, and the adopter, waiting for that record, posts nothing: one answer, whole."""
    async with cluster(tmp_path, database_url, admin_url) as deployment:
        conv = await deployment.mention(0)
        assert conv is not None and await deployment.wait_card(conv)
        run_id = await waiting_run(deployment, conv)
        slack = deployment.slack
        slack.hold("chat.stopStream")
        await deployment.approve(conv, 0)
        await slack.wait_for(lambda: slack.held("chat.stopStream"), 30)
        async with deployment.heartbeat_stalled(0):  # the adopter finds it `answering`
            await deployment.processes[1].wait_log("1 to finish or fail", 30)
        await deployment.processes[0].wait_log(f"run {run_id}: ", 30)
        await deployment.processes[0].wait_log("lets it go", 30)
        slack.release()
        verdict = await deployment.verdict()
        verdict.raise_if_broken()
        assert verdict.pending == 0 and deployment.executed() == {conv.service: 1}
        texts = deployment.slack_texts(conv)
        assert not any("Posted after a restart" in t or "cut short" in t for t in texts), texts
