"""Two real `chatops serve` processes on one PostgreSQL database, one audit sink: runs on both
processes, a sink that refuses a few batches meanwhile, and still every event reaches the sink
(and the file both processes append to) exactly once, each run's events in order."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import aiohttp
import pytest

from bot.storage.models import AuditOutbox
from bot.surfaces.slack.cards import APPROVE_ACTION
from tests.databases import rows
from tests.fakes.audit_sink import FakeAuditSink
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.ops_api import OpsAPI, restart_then_answer
from tests.fakes.slack_api import FakeSlack
from tests.server.serve_process import SlackSender
from tests.server.test_processes import answered, root_of, runs_ended, two_processes
from tests.slack.e2e import wait_card
from tests.slack.payloads import mention

pytestmark = pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)

SECRET = "two-process-sink-key"  # noqa: S105 - a test key
RUNS = 4
EVENTS_PER_RUN = 4  # approval requested, approved; the call started, its outcome


async def test_two_processes_deliver_each_event_once_in_order(
    tmp_path: Path, database_url: str, ops_api: OpsAPI, fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
) -> None:  # fmt: skip
    sink = await FakeAuditSink(SECRET).start()
    sink.fail_next(3, status=503)
    audit_file = tmp_path / "audit.jsonl"
    fake_openai.respond_with(restart_then_answer)
    events = [mention(f"restart api ({i})", user="U0DEV") for i in range(RUNS)]
    try:
        async with (
            aiohttp.ClientSession() as http,
            two_processes(
                tmp_path, database_url, ops_api, fake_slack, fake_openai,
                chatops_audit_sink_url=sink.url, chatops_audit_sink_secret=SECRET,
                chatops_audit_sink_file=str(audit_file), chatops_audit_sink_interval_s="0.02",
                chatops_audit_sink_retry_max_s="0.05", chatops_audit_sink_batch="3",
            ) as (a, b),
        ):  # fmt: skip
            slack = SlackSender(http)
            for i, event in enumerate(events):
                assert await slack.send(a if i % 2 == 0 else b, event) == 200
            cards = [await wait_card(fake_slack, root_of(e), pending=True) for e in events]
            for i, card in enumerate(cards):
                other = b if i % 2 == 0 else a
                assert await slack.click(other, card, APPROVE_ACTION, user="U0LEAD") == 200
            for event in events:
                await answered(fake_slack, root_of(event))
            await runs_ended(database_url, RUNS)
            await sink.wait_for(lambda: len(sink.events) >= RUNS * EVENTS_PER_RUN, 60)
            await _outbox_empty(database_url)
        assert sink.refused == 3 and sink.bad_signatures == 0
        uids = sink.uids()
        assert len(uids) == len(set(uids)) == RUNS * EVENTS_PER_RUN  # each exactly once
        for run_id in {e["metadata"]["correlation_uid"] for e in sink.events}:
            outcomes = [
                e["unmapped"]["outcome"]
                for e in sink.events
                if e["metadata"]["correlation_uid"] == run_id
            ]
            assert outcomes == ["pending", "approved", "in progress", "ok"]
        lines = audit_file.read_text().splitlines()
        assert sorted(json.loads(line)["metadata"]["uid"] for line in lines) == sorted(uids)
        assert len(lines) == len(uids)
    finally:
        await sink.stop()


async def _outbox_empty(database_url: str) -> None:
    """Both sinks took everything: the sender deletes a batch after its sink took it."""
    for _ in range(200):
        if not rows(database_url, AuditOutbox):
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"{len(rows(database_url, AuditOutbox))} events never left the outbox")
