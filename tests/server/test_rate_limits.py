"""Tool rate limits through a real `chatops serve`: a call over its conversation's limit is
refused (not run), logged as a WARNING and said in its thread; another conversation of the
same tool is not starved by it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp

from tests.fakes.openai_server import FakeOpenAI, Turn, answer, tool_call
from tests.fakes.ops_api import OpsAPI
from tests.fakes.slack_api import FakeSlack
from tests.server.serve_process import SlackSender, serve_env, serving
from tests.slack.e2e import manifest, texts
from tests.slack.payloads import mention


def look_twice(body: dict[str, Any]) -> Turn:
    """The model looks at `api` twice, then answers."""
    if body.get("stream"):
        return answer("Looked.")
    looked = sum(1 for m in body["messages"] if m["role"] == "tool")
    if looked < 2:
        return tool_call("ops__get_service", {"name": "api"}, id=f"call_look_{looked}")
    return answer("looked")


async def test_a_call_over_the_conversation_limit_is_refused_logged_and_told(
    tmp_path: Path, ops_api: OpsAPI, fake_slack: FakeSlack, fake_openai: FakeOpenAI
) -> None:
    fake_openai.respond_with(look_twice)
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    (manifests / "ops.yaml").write_text(manifest(ops_api.url))
    env = serve_env(
        database_url=f"sqlite:///{tmp_path / 'chatops.db'}", manifests=manifests,
        slack_url=fake_slack.url, llm_url=fake_openai.base_url,
        chatops_tool_calls_per_minute="1",
    )  # fmt: skip
    first, second = mention("look at api", user="U0DEV"), mention("and again", user="U0EVE")
    async with aiohttp.ClientSession() as http, serving(tmp_path, env) as bot:
        slack = SlackSender(http)
        for event in (first, second):
            assert await slack.send(bot, event) == 200
        for event in (first, second):
            root = event["event"]["ts"]
            await fake_slack.wait_for(
                lambda r=root: any("Looked." in t for t in texts(fake_slack, r)), 30
            )  # noqa: E501
        warning = await bot.wait_log("rate limit: ops__get_service refused")
        await bot.stop()
    assert " WARNING " in warning
    for event in (first, second):  # each conversation: one call ran, the second was refused
        said = texts(fake_slack, event["event"]["ts"])
        assert any("`ops__get_service` was refused: at most 1 calls a minute" in t for t in said)
    assert ops_api.calls == [("GET", "/services/api")] * 2  # one a conversation: none starved
    told = [m.get("content") or "" for r in fake_openai.requests for m in r["messages"]]
    assert any("was called too often" in t for t in told)
