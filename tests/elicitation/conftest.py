"""Elicitation on Slack and Feishu: the real app (`create_app`) with the SDK server
`tests/fakes/mcp_rich_server.py` (its `restart` asks for a window with `ctx.elicit`) beside the
security suite's ops connector (its `restart` needs U0LEAD's or ou_lead's approval), signed
events and clicks against FakeSlack / FakeFeishu, the model scripted by FakeOpenAI."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bot.server import create_app
from tests.fakes.fixtures import fake_openai  # noqa: F401
from tests.fakes.openai_server import FakeOpenAI, Turn, answer, tool_call, tool_calls
from tests.fakes.ops_api import OpsAPI
from tests.feishu.e2e import FeishuBot
from tests.feishu.e2e import bot_settings as feishu_settings
from tests.security.conftest import MANIFEST, OPS_TOKEN, db_rows  # noqa: F401
from tests.server.test_mcp_rich import rich_manifest
from tests.slack.e2e import SlackBot, bot_settings

WINDOW_TEXT = "restart of api: 30 min, 'deploy 1.2', approve"


@pytest.fixture
def manifests(tmp_path: Path, ops_api: OpsAPI, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("OPS_TOKEN", OPS_TOKEN)
    directory = tmp_path / "manifests"
    directory.mkdir()
    approvers = "approvers: [U0LEAD, U0LEAD2]"  # and Feishu's lead
    manifest = MANIFEST.format(url=ops_api.url).replace(approvers, approvers[:-1] + ", ou_lead]")
    (directory / "ops.yaml").write_text(manifest)
    rich_manifest(directory)
    return directory


def calling(*calls: tuple[str, dict[str, Any]]) -> Callable[[dict[str, Any]], Turn]:
    """The model: these calls at once (after picking them, when it is asked to pick tools),
    then an answer."""

    def respond(body: dict[str, Any]) -> Turn:
        if body.get("stream"):
            return answer("Here it is.")
        choice = body.get("tool_choice")
        if isinstance(choice, dict):  # the tool selection call (more than 12 tools)
            return tool_call(choice["function"]["name"], {"tools": [n for n, _ in calls]})
        if any(m["role"] == "tool" for m in body["messages"]):
            return answer("done")
        return tool_calls(*calls)

    return respond


def tool_results(fake: FakeOpenAI) -> dict[str, str]:
    """What each tool call returned to the model, by tool call id order (first seen)."""
    found: dict[str, str] = {}
    for body in fake.requests:
        for message in body["messages"]:
            if message["role"] == "tool":
                found.setdefault(message["tool_call_id"], message["content"])
    return found


@pytest.fixture
async def slack_bot(
    database_url,
    manifests,
    fake_slack,
    fake_openai,  # noqa: F811
    aiohttp_client,
) -> SlackBot:
    settings = bot_settings(database_url=database_url, manifests=manifests, slack=fake_slack,
                            llm_url=fake_openai.base_url)  # fmt: skip
    return SlackBot(await aiohttp_client(create_app(settings)), fake_slack)


@pytest.fixture
async def feishu_bot(
    database_url,
    manifests,
    fake_feishu,
    fake_openai,  # noqa: F811
    aiohttp_client,
) -> FeishuBot:
    settings = feishu_settings(database_url=database_url, manifests=manifests, fake=fake_feishu,
                               llm_url=fake_openai.base_url)  # fmt: skip
    return FeishuBot(await aiohttp_client(create_app(settings)), fake_feishu)
