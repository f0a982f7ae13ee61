"""A synthesis stream that breaks half-way: the thread shows the fallback, never the partial
text followed by it (Slack through the real app; the terminal through `chatops chat`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.fakes.openai_server import FakeOpenAI, Turn, answer, broken_stream, tool_call
from tests.fakes.ops_api import OpsAPI
from tests.fakes.slack_api import FakeSlack
from tests.slack.e2e import ops_bot, texts
from tests.slack.payloads import CHANNEL, mention

PARTIAL = "Partial synthesis that must not stay"
FALLBACK = "api status: healthy (the loop's own answer)"


def status_then_broken_synthesis(body: dict[str, Any]) -> Turn:
    if body.get("stream"):
        return broken_stream(PARTIAL + " on screen.", after=2)
    if any(m["role"] == "tool" for m in body["messages"]):
        return answer(FALLBACK)
    return tool_call("ops__status", {"name": "api"})


async def test_slack_thread_gets_the_fallback_and_no_partial_text(
    aiohttp_client, database_url, tmp_path: Path, ops_api: OpsAPI, fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
) -> None:  # fmt: skip
    bot = await ops_bot(
        aiohttp_client, database_url, tmp_path, ops_api.url, fake_slack, fake_openai.base_url
    )
    fake_openai.respond_with(status_then_broken_synthesis)
    event = mention("is the api healthy?", user="U0DEV")
    root = event["event"]["ts"]
    assert await bot.send(event) == 200
    await bot.wait_idle()
    assert len(fake_openai.streamed_requests()) == 1  # the synthesis was tried, and broke
    thread = fake_slack.thread_messages(CHANNEL, root)
    answers = [m for m in thread if FALLBACK in m["text"]]
    assert len(answers) == 1 and answers[0]["text"].strip() == FALLBACK
    every_text = json.dumps([call.args for call in fake_slack.calls()])
    assert PARTIAL[:8] not in every_text  # not shown, not appended to
    assert texts(fake_slack, root)[0].startswith(":white_check_mark: Done")
