"""The `audit__report` tool on Slack, end to end: "@bot who approved restarts last week?"
through the real app (signed events in, FakeSlack out, the model on FakeOpenAI); the report
reaches the model for a viewer, and the viewer hook blocks it for anyone else."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sqlalchemy import text

from bot.server import create_app
from bot.storage.database import create_db_engine
from tests.audit.conftest import seed
from tests.fakes.fixtures import fake_openai  # noqa: F401
from tests.fakes.openai_server import FakeOpenAI, Turn, answer, tool_call
from tests.fakes.slack_api import FakeSlack
from tests.slack.e2e import SlackBot, bot_settings
from tests.slack.payloads import CHANNEL, mention

VIEWER = "U0AUDIT"
ANSWER_TEXT = "Here is who approved restarts."


@pytest.fixture
async def bot(
    database_url: str,
    tmp_path,
    aiohttp_client,
    fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,  # noqa: F811
) -> SlackBot:
    (tmp_path / "manifests").mkdir()
    settings = bot_settings(
        database_url=database_url,
        manifests=tmp_path / "manifests",
        slack=fake_slack,
        llm_url=fake_openai.base_url,
        chatops_audit_viewers=VIEWER,
        chatops_audit_all_channels_viewers=VIEWER,  # the seeded calls are in other channels
    )
    bot = SlackBot(await aiohttp_client(create_app(settings)), fake_slack)
    engine = create_db_engine(database_url)  # the seeded week, in the running bot's database
    try:
        await asyncio.to_thread(seed, engine)
        # the seed's R0 is an unowned run still "running" (before the window): a live bot's
        # recovery would adopt it and call the model for it mid-test, so here it has ended
        with engine.begin() as conn:
            conn.execute(text("UPDATE run SET status = 'cancelled' WHERE id = 'R0'"))
    finally:
        engine.dispose()
    return bot


def audit_then_answer(body: dict[str, Any]) -> Turn:
    if body.get("stream"):
        return answer(ANSWER_TEXT)
    if body["messages"][-1]["role"] == "tool":
        return answer("Reported.")
    window = {"since": "2026-11-13T12:00Z", "until": "2026-11-20T12:00Z", "action": "restart"}
    return tool_call("audit__report", window, id="call_audit")


@pytest.mark.parametrize(
    ("user", "sees_report"), [(VIEWER, True), ("U0NOSY", False)], ids=["viewer", "non-viewer"]
)
async def test_agent_answers_from_the_audit_tool_for_viewers_only(
    bot: SlackBot,
    fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,  # noqa: F811
    user: str,
    sees_report: bool,
) -> None:
    fake_openai.respond_with(audit_then_answer)
    event = mention("who approved restarts last week?", user=user)
    root = event["event"]["ts"]
    assert await bot.send(event) == 200
    await bot.wait_idle()
    thread = [m.get("text", "") for m in fake_slack.thread_messages(CHANNEL, root)]
    assert any(ANSWER_TEXT in text for text in thread)
    [observation] = [
        str(m["content"])
        for body in fake_openai.requests
        for m in body["messages"]
        if m["role"] == "tool"
    ]
    if sees_report:
        assert "## Mutating calls (5)" in observation
        assert "approved by U_DAVE" in observation and "approved by U_CAROL" in observation
    else:
        assert "not allowed to see audit reports" in observation
        assert "U_DAVE" not in observation and "Mutating calls" not in observation
