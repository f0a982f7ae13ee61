"""Hole 2, "any per-user rule": a call is made for every requester of its run, so it counts
against each one's per-user rate limit (an interrupter cannot spend the starter's budget only,
nor dodge their own). Signed Slack events, SQLite and PostgreSQL."""

from __future__ import annotations

from bot.server import create_app
from bot.storage.models import CallLog
from tests.fakes.openai_server import FakeOpenAI, tool_call
from tests.fakes.ops_api import OpsAPI
from tests.fakes.slack_api import FakeSlack
from tests.security.conftest import finishing
from tests.security.test_requesters import interrupted_run
from tests.slack.e2e import SlackBot
from tests.slack.payloads import mention


async def test_an_interrupters_per_user_limit_is_charged_for_the_calls_they_asked_for(
    settings,
    fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
    ops_api: OpsAPI,
    db_rows,
    aiohttp_client,
) -> None:
    """Per-user limit 2: U0DEV's run makes one call before and one after reading U0OPS's
    reply. U0OPS's own run then gets one call, not two: the second is refused for U0OPS."""
    limited = settings.model_copy(update={"chatops_tool_calls_per_user_per_minute": 2})
    bot = SlackBot(await aiohttp_client(create_app(limited)), fake_slack)
    fake_openai.script(
        tool_call("ops__get_service", {"name": "db"}),
        *finishing(tool_call("ops__get_service", {"name": "db"})),
        tool_call("ops__get_service", {"name": "api"}),
        *finishing(tool_call("ops__get_service", {"name": "api"})),
    )
    await interrupted_run(
        bot, fake_openai, starter="U0DEV", interrupter="U0OPS", text="check db again"
    )
    await bot.wait_idle()
    assert ops_api.calls.count(("GET", "/services/db")) == 2
    await bot.send(mention("how is api?", user="U0OPS"))
    await bot.wait_idle()
    assert ops_api.calls.count(("GET", "/services/api")) == 1
    rows = sorted(db_rows(CallLog, tool_name="ops__get_service"), key=lambda r: r.id)
    assert [(r.requesters, r.result_status) for r in rows] == [
        (["U0DEV"], "ok"),
        (["U0DEV", "U0OPS"], "ok"),
        (["U0OPS"], "ok"),
        (["U0OPS"], "blocked"),
    ]
    refusal = [
        str(m["content"])
        for body in fake_openai.requests
        for m in body["messages"]
        if m["role"] == "tool" and "too often" in str(m["content"])
    ]
    assert refusal and "limit 2 per minute for U0OPS" in refusal[-1]
