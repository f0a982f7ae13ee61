"""The audit sinks hear of a call whose outcome is unknown: an approved call is mid-flight when
its process stops; the next process resumes the run, meets the call's `started` row and does not
run it again; the sink gets the call's start and then `outcome unknown`, never an outcome."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from bot.audit.sinks.sender import SenderPacing, SinkSender
from bot.audit.sinks.targets import FileSink
from bot.engine.tools import ToolResult
from bot.storage import outbox
from bot.storage.database import Database
from bot.storage.outbox import OutboxSinks
from tests.fakes.openai_server import answer, tool_calls
from tests.runs.conftest import Harness

pytestmark = pytest.mark.both_databases  # the resumed run's replay reads the call log


async def test_a_call_cut_off_by_a_stop_reaches_the_sink_as_outcome_unknown(
    harness: Harness, tmp_path
) -> None:
    harness.db.close()
    harness.db = Database(harness.engine, audit_sinks=OutboxSinks(("file",)))
    restart = harness.tools["ops__restart"]
    started, hold = asyncio.Event(), asyncio.Event()

    async def slow(args: dict[str, Any]) -> ToolResult:
        restart.calls.append(dict(args))
        started.set()
        await hold.wait()
        return ToolResult("restarted")

    restart.invoke = slow  # type: ignore[method-assign]
    harness.fake.script(
        tool_calls(("ops__restart", {"service": "api"}), ("ops__restart", {"service": "web"})),
        answer("api unknown, web restarted"),
        answer("Web restarted; check api."),
    )
    first = await harness.app()
    await first.manager.dispatch(harness.message("restart api and web"))
    await first.surface.wait_for_card(count=2)
    api, web = sorted(first.surface.cards(), key=lambda c: '"web"' in c.arguments)
    await first.broker.decide(api.approval_id, "U_LEAD", "approve", platform="test")
    await asyncio.wait_for(started.wait(), 10)  # the api restart is running ...
    await first.close()  # ... when the process stops
    hold.set()
    second = await harness.app()
    await second.broker.decide(web.approval_id, "U_LEAD", "approve", platform="test")
    await second.surface.wait_for_answer()
    await second.manager.wait_idle(10)

    path = tmp_path / "audit.jsonl"
    sink = FileSink(path)
    sender = SinkSender(harness.db, [sink], holder="test", pacing=SenderPacing(batch=1000))
    assert await sender.send_once(sink) > 0
    await sender.close()
    assert await harness.db.run(outbox.pending_events) == 0
    events = [json.loads(line) for line in path.read_text().splitlines()]
    [api_row] = [c for c in harness.calls() if c.approval_id == api.approval_id]
    api_events = [e for e in events if e["unmapped"].get("call_id") == api_row.id]
    assert [e["unmapped"]["outcome"] for e in api_events] == ["in progress", "outcome unknown"]
    unknown = api_events[-1]
    assert unknown["status_id"] == 0 and unknown["status"] == "Unknown"
    assert unknown["metadata"]["uid"] == f"call-{api_row.id}-unknown"
    assert unknown["unmapped"]["approvers"] == ["U_LEAD"]
