"""Connector APIs that stall never hold up Slack: the connectors' HTTP pool
(CHATOPS_CONNECTOR_MAX_CONNECTIONS) and the chat platforms' are apart. With every connection
of the connectors' pool held by a call its API does not answer, a new mention still gets its
status message and its answer, and the held call goes on once the API answers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.fakes.openai_server import FakeOpenAI, Turn, answer, tool_call
from tests.fakes.ops_api import OpsAPI
from tests.fakes.slack_api import FakeSlack
from tests.slack.e2e import ops_bot
from tests.slack.payloads import CHANNEL, mention


def look_up_the_service_when_asked(body: dict[str, Any]) -> Turn:
    """ "look at api" calls the read-only get_service; "hello" is answered at once."""
    if body.get("stream"):
        return answer("Done.")
    asked = next(m["content"] for m in body["messages"] if m["role"] == "user")
    if "look at" in str(asked) and not any(m["role"] == "tool" for m in body["messages"]):
        return tool_call("ops__get_service", {"name": "api"}, id="call_look")
    return answer("nothing to do")


def in_thread(fake: FakeSlack, root: str) -> list[dict[str, Any]]:
    """What the bot posted in reply to `root` (a bot message's own ts can equal a root's)."""
    return [m for m in fake.thread_messages(CHANNEL, root) if m.get("thread_ts") == root]


def answered(fake: FakeSlack, root: str) -> bool:
    return any("Done." in str(m.get("text")) for m in in_thread(fake, root))


async def test_a_stalled_connector_api_holds_up_no_status_message(
    database_url: str, aiohttp_client: Any, tmp_path: Path, ops_api: OpsAPI,
    fake_slack: FakeSlack, fake_openai: FakeOpenAI,
) -> None:  # fmt: skip
    fake_openai.respond_with(look_up_the_service_when_asked)
    bot = await ops_bot(aiohttp_client, database_url, tmp_path, ops_api.url, fake_slack,
                        fake_openai.base_url, chatops_connector_max_connections=1)  # fmt: skip
    fake_slack.close_connections = True  # no idle Slack connection to reuse: each call connects
    ops_api.hold()  # the ops API takes the request and does not answer
    stalled = mention("look at api", user="U0DEV")
    assert await bot.send(stalled) == 200
    await ops_api.wait_for(lambda: len(ops_api.calls) == 1)  # the pool's one connection is held

    other = mention("hello", user="U0OPS")
    assert await bot.send(other) == 200
    root = other["event"]["ts"]
    # its status message, and its answer, while the connectors' pool is still full
    await fake_slack.wait_for(lambda: in_thread(fake_slack, root), 15)
    await fake_slack.wait_for(lambda: answered(fake_slack, root), 15)
    assert len(ops_api.calls) == 1 and not ops_api.restarts  # still waiting on the ops API

    ops_api.release()
    await bot.wait_idle()
    assert answered(fake_slack, stalled["event"]["ts"])
