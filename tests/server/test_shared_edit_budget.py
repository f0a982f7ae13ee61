"""Slack's status-edit budget holds across processes: two real `chatops serve` processes on one
PostgreSQL database edit statuses in one workspace, against FakeSlack enforcing Slack's
per-workspace tiers (`tests/fakes/slack_limits.py`), and Slack never answers 429 to a
`chat.update`.

Each process learns from its heartbeat how many processes are live and paces each workspace
to its share (`UpdateLimiter(share=...)`). FakeSlack holds `chat.update` to Tier 3 (50 a
minute) with a burst of 20 (24 s of it): two processes pacing to 40 a minute and a burst of 10
each (what one process alone may do) overrun it within seconds of their first burst.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.fakes.openai_server import FakeOpenAI, Turn, answer, tool_call
from tests.fakes.ops_api import OpsAPI
from tests.fakes.slack_api import FakeSlack
from tests.fakes.slack_limits import TierLimits
from tests.server.serve_process import SlackSender
from tests.server.test_processes import runs_ended, two_processes
from tests.slack.payloads import mention

pytestmark = pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)

RUNS = 10
STEPS = 4  # tool calls a run makes: a status edit each, then its end


def four_steps(body: dict[str, Any]) -> Turn:
    done = sum(1 for m in body["messages"] if m["role"] == "tool")
    if body.get("stream") or done >= STEPS:
        return answer("all four looked at")
    return tool_call("ops__get_service", {"name": f"svc{done}"}, id=f"call_{done}")


async def test_two_processes_editing_one_workspace_stay_within_its_budget(
    tmp_path: Path, database_url: str, ops_api: OpsAPI, fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
):  # fmt: skip
    fake_slack.enforce_limits(TierLimits(burst_s=24.0))
    fake_openai.respond_with(four_steps)
    async with (
        aiohttp.ClientSession() as http,
        two_processes(
            tmp_path, database_url, ops_api, fake_slack, fake_openai,
            chatops_status_edit_interval_s="0",
        ) as (a, b),
    ):  # fmt: skip
        await a.wait_log("2 live process(es) share")
        await b.wait_log("2 live process(es) share")
        sender = SlackSender(http)
        for i in range(RUNS):
            channel = f"C0LOAD{i}"  # a channel each: chat.postMessage's per-channel limit aside
            event = mention("look at four services", channel=channel, event_id=f"Ev{i}")
            assert await sender.send(a if i % 2 else b, event) == 200
        await runs_ended(database_url, RUNS, timeout_s=120)
    edits = fake_slack.calls("chat.update")
    assert [c for c in edits if c.status == 429] == []
    # more edits than FakeSlack's burst: both processes spent the budget past it (at 40 a
    # minute each, as one process alone may, they drew some eighty 429s here)
    assert len(edits) > 20
