"""Audit sinks end to end: a real run through the app (a signed Slack mention, the fake model,
the ops API, an approval card clicked) sends every call-log and approval event, OCSF-shaped, to
an HTTP sink that checks the HMAC and to a file. The HTTP sink is down (connection refused,
then 503) while the run goes on; the run is not held up, and once the sink is back it gets
every event exactly once, in order. No secret and no raw argument ever goes out.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from bot.server import RUNTIME_KEY
from bot.storage import outbox
from bot.surfaces.slack.cards import APPROVE_ACTION
from tests.fakes.audit_sink import FakeAuditSink
from tests.fakes.openai_server import FakeOpenAI, Turn, answer, tool_call
from tests.fakes.ops_api import OpsAPI
from tests.fakes.slack_api import FakeSlack
from tests.server.test_metrics import Scrape
from tests.slack.e2e import SlackBot, ops_bot, wait_card
from tests.slack.payloads import mention

pytestmark = pytest.mark.both_databases  # the outbox's claims and deletes differ per dialect

SINK_SECRET = "sink-hmac-key-0b7e5d"  # noqa: S105 - a test key
MODEL_KEY = "sk-test-not-a-secret"  # the app's OpenAI key: a secret the redactor knows
RAW_ARGUMENT = "svc-marker-93a1"  # a raw argument value: must never reach a sink


def look_then_restart(body: dict[str, Any]) -> Turn:
    """Look at a service whose name carries a planted secret, restart `api` (approval), answer."""
    if body.get("stream"):
        return answer("api restarted")
    tool_results = [m for m in body["messages"] if m["role"] == "tool"]
    if not tool_results:
        return tool_call("ops__get_service", {"name": f"{RAW_ARGUMENT}-{MODEL_KEY}"}, id="c_get")
    if len(tool_results) == 1:
        return tool_call("ops__restart", {"name": "api"}, id="c_restart")
    return answer("api restarted")


async def sink_bot(
    aiohttp_client: Any, database_url: str, tmp_path: Path, ops_api: OpsAPI,
    fake_slack: FakeSlack, fake_openai: FakeOpenAI, sink: FakeAuditSink,
) -> SlackBot:  # fmt: skip
    return await ops_bot(
        aiohttp_client, database_url, tmp_path, ops_api.url, fake_slack, fake_openai.base_url,
        approvers=("U0LEAD",),
        chatops_audit_sink_url=sink.url,
        chatops_audit_sink_secret=SINK_SECRET,
        chatops_audit_sink_file=str(tmp_path / "audit.jsonl"),
        chatops_audit_sink_interval_s=0.02,
        chatops_audit_sink_retry_max_s=0.05,
    )  # fmt: skip


async def test_a_run_reaches_a_sink_that_was_down_once_in_order(
    aiohttp_client, database_url, tmp_path, ops_api, fake_slack, fake_openai
):
    sink = await FakeAuditSink(SINK_SECRET).start()
    try:
        bot = await sink_bot(aiohttp_client, database_url, tmp_path, ops_api, fake_slack,
                             fake_openai, sink)  # fmt: skip
        runtime = bot.app[RUNTIME_KEY]
        await sink.go_down()  # connection refused, for the whole run
        fake_openai.respond_with(look_then_restart)
        event = mention("check the marker service, then restart api", user="U0DEV")
        root = event["event"]["ts"]
        assert await bot.send(event) == 200
        card = await wait_card(fake_slack, root, pending=True)
        assert await bot.click(card, APPROVE_ACTION, user="U0LEAD") == 200
        await bot.wait_idle()
        assert ops_api.restarts == ["api"]  # the run finished while the sink was down
        assert sink.events == []
        assert await runtime.db.run(outbox.pending_events, "http") == 6  # kept, not lost
        scraped = Scrape(await (await bot.client.get("/metrics")).text())
        assert scraped.value("chatops_audit_events_pending", sink="http") == 6

        sink.fail_next(2, status=503)
        await sink.come_up()
        await sink.wait_for(lambda: len(sink.events) >= 6)
        await _drained(runtime)
        assert sink.refused == 2 and sink.bad_signatures == 0
        uids = sink.uids()
        assert len(uids) == len(set(uids)) == 6  # exactly once
        call_get, call_restart = _call_ids(sink.events)
        approval_id = sink.events[2]["unmapped"]["approval_id"]
        assert uids == [  # the order they happened in
            f"call-{call_get}-started",
            f"call-{call_get}-ok",
            f"approval-{approval_id}-pending",
            f"approval-{approval_id}-approved",
            f"call-{call_restart}-started",
            f"call-{call_restart}-ok",
        ]
        _check_shape(sink.events)
        scraped = Scrape(await (await bot.client.get("/metrics")).text())
        assert scraped.value("chatops_audit_events_pending", sink="http") == 0

        # the file sink got the same events, in the same order
        lines = (tmp_path / "audit.jsonl").read_text().splitlines()
        assert [json.loads(line)["metadata"]["uid"] for line in lines] == uids

        # nothing secret, no raw argument: not over HTTP, not in the file
        shipped = json.dumps(sink.events) + "\n".join(lines)
        for leaked in (MODEL_KEY, SINK_SECRET, RAW_ARGUMENT):
            assert leaked not in shipped
    finally:
        await sink.stop()


async def test_an_expired_approval_and_its_call_reach_the_file_sink(
    aiohttp_client, database_url, tmp_path, ops_api, fake_slack, fake_openai
):
    audit_file = tmp_path / "audit.jsonl"
    bot = await ops_bot(
        aiohttp_client, database_url, tmp_path, ops_api.url, fake_slack, fake_openai.base_url,
        approvers=("U0LEAD",), chatops_approval_timeout_s=0.5,
        chatops_audit_sink_file=str(audit_file), chatops_audit_sink_interval_s=0.02,
    )  # fmt: skip
    fake_openai.respond_with(look_then_restart)
    event = mention("check the marker service, then restart api", user="U0DEV")
    await bot.send(event)
    await wait_card(fake_slack, event["event"]["ts"], pending=False)  # expired, unclicked
    await bot.wait_idle()
    await _drained(bot.app[RUNTIME_KEY])
    events = [json.loads(line) for line in audit_file.read_text().splitlines()]
    outcomes = [(e["unmapped"]["event_kind"], e["unmapped"]["outcome"]) for e in events]
    assert outcomes == [
        ("tool_call", "in progress"),
        ("tool_call", "ok"),
        ("approval", "pending"),
        ("approval", "expired"),
        ("tool_call", "expired"),  # never started: no start event
    ]
    expired_approval, expired_call = events[3], events[4]
    assert expired_approval["status_id"] == 2 and expired_approval["unmapped"]["approvers"] == []
    assert expired_approval["status_detail"] == "expired: timeout"
    assert expired_call["status_id"] == 2 and expired_call["unmapped"]["decision"] == "expired"
    assert ops_api.restarts == []


def _call_ids(events: list[dict[str, Any]]) -> tuple[int, int]:
    ids = [e["unmapped"]["call_id"] for e in events if e["unmapped"]["event_kind"] == "tool_call"]
    return ids[0], ids[-1]


def _check_shape(events: list[dict[str, Any]]) -> None:
    """OCSF API Activity, with what an auditor asks: who, what, rule, approvers, outcome."""
    for event in events:
        assert event["class_uid"] == 6003 and event["category_uid"] == 6
        assert event["type_uid"] == 600300 + event["activity_id"]
        assert isinstance(event["time"], int) and event["time"] > 0
        assert event["src_endpoint"]["svc_name"] == "slack"
        assert event["dst_endpoint"]["svc_name"] == "ops"
        assert len(event["unmapped"]["fingerprint"]) >= 16
    get_started, get_ok, requested, approved, started, done = events
    assert get_ok["activity_id"] == 2 and get_ok["api"]["operation"] == "ops__get_service"
    assert get_ok["status_id"] == 1 and get_ok["unmapped"]["decision"] == "not_required"
    assert get_started["status_id"] == 0 and get_started["unmapped"]["outcome"] == "in progress"
    assert requested["activity_name"] == "Approval Requested"
    assert requested["actor"]["user"]["uid"] == "U0DEV" and requested["status_id"] == 0
    assert approved["activity_name"] == "Approval Decided"
    assert approved["actor"]["user"]["uid"] == "U0LEAD" and approved["status_id"] == 1
    assert approved["unmapped"]["approvers"] == ["U0LEAD"]
    assert approved["unmapped"]["latency_ms"] >= 0
    assert done["activity_id"] == 3 and done["api"]["operation"] == "ops__restart"
    assert done["actor"]["user"]["uid"] == "U0DEV"
    assert done["unmapped"]["approvers"] == ["U0LEAD"]
    assert done["unmapped"]["decision"] == "approved" and done["unmapped"]["outcome"] == "ok"
    assert done["unmapped"]["fingerprint"] == approved["unmapped"]["fingerprint"]
    assert done["unmapped"]["latency_ms"] is not None and done["duration"] >= 0


async def _drained(runtime: Any) -> None:
    """The outbox empties once both sinks took everything (a bounded wait on a condition)."""

    async def empty() -> None:
        # the rows go in the sender's own transaction: nothing to wait on but the table
        while await runtime.db.run(outbox.pending_events) != 0:  # noqa: ASYNC110
            await asyncio.sleep(0.02)

    await asyncio.wait_for(empty(), 20)
