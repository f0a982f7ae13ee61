"""Tool rate limits through signed Slack events: scoped per conversation and per user, so many
conversations at once never starve each other; a refusal is logged and told in the thread."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from bot.server import create_app
from tests.fakes.openai_server import FakeOpenAI, Turn, answer, tool_call
from tests.slack.e2e import OpsAPI, SlackBot, bot_settings, manifest, texts
from tests.slack.payloads import mention


def check_then_answer(calls: int):
    """The model: call `ops__get_service` `calls` times (one per turn), then answer."""

    def respond(body: dict[str, Any]) -> Turn:
        if body.get("stream"):
            return answer("Checked.")
        done = sum(1 for m in body["messages"] if m["role"] == "tool")
        if done >= calls:
            return answer("checked")
        return tool_call("ops__get_service", {"name": "api"}, id=f"call_{done}")

    return respond


@pytest.fixture
def make_bot(tmp_path, database_url, ops_api, fake_slack, fake_openai, aiohttp_client):
    async def build(**extra: Any) -> SlackBot:
        manifests = tmp_path / "manifests"
        manifests.mkdir(exist_ok=True)
        (manifests / "ops.yaml").write_text(manifest(ops_api.url))
        settings = bot_settings(
            database_url=database_url,
            manifests=manifests,
            slack=fake_slack,
            llm_url=fake_openai.base_url,
            **extra,
        )
        return SlackBot(await aiohttp_client(create_app(settings)), fake_slack)

    return build


async def test_seventy_conversations_at_once_all_get_their_call(
    make_bot, fake_openai: FakeOpenAI, ops_api: OpsAPI
) -> None:
    """With the default limits, 70 conversations (one team member asking in each) calling the
    same read-only tool at once all run it (one process-wide window of 60 refused ten)."""
    fake_openai.respond_with(check_then_answer(1))
    # production pacing: 70 runs each editing its status 20 times a second (the suite's pace)
    # is a load no deployment makes, and on a loaded machine it starves the inbound worker
    bot = await make_bot(
        chatops_max_active_runs=100,
        chatops_max_active_runs_per_user=100,
        chatops_status_edit_interval_s=1.0,
        chatops_answer_stream_interval_s=1.0,
    )
    bot.lift_edit_budget()
    events = [mention(f"how is api? ({i})", user="U0DEV") for i in range(70)]
    statuses = await asyncio.gather(*(bot.send(e) for e in events))
    assert statuses == [200] * 70
    await bot.wait_idle(60)  # 70 runs on a loaded two-core machine: a bound, not a pace
    assert ops_api.calls.count(("GET", "/services/api")) == 70
    tool_results = [
        str(m.get("content"))
        for body in fake_openai.requests
        for m in body["messages"]
        if m["role"] == "tool"
    ]
    assert not any("too often" in t for t in tool_results)


async def test_a_refused_call_is_logged_and_told_in_its_thread(
    make_bot, fake_openai: FakeOpenAI, ops_api: OpsAPI, caplog: pytest.LogCaptureFixture
) -> None:
    fake_openai.respond_with(check_then_answer(3))
    bot = await make_bot(chatops_tool_calls_per_minute=2)
    busy, quiet = mention("check api three times", user="U0DEV"), mention("and again", user="U0OPS")
    with caplog.at_level(logging.WARNING, logger="hooks.guards"):
        assert await bot.send(busy) == 200
        await bot.wait_idle()
        assert await bot.send(quiet) == 200
        await bot.wait_idle()
    # each thread: two calls ran (the first thread's calls took nothing from the second's
    # budget), the third was refused, and that thread was told once
    assert ops_api.calls.count(("GET", "/services/api")) == 2 + 2
    for event in (busy, quiet):
        notices = [t for t in texts(bot.fake, event["event"]["ts"]) if "was refused" in t]
        assert len(notices) == 1 and "`ops__get_service`" in notices[0]
        assert "in this conversation" in notices[0]
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert any("rate limit: ops__get_service refused" in r.getMessage() for r in warnings)
    refusals = [
        str(m.get("content"))
        for body in fake_openai.requests
        for m in body["messages"]
        if m["role"] == "tool" and "too often" in str(m.get("content"))
    ]
    assert refusals
