"""The log a team runs the bot by: a real `chatops serve` with `CHATOPS_LOG_FORMAT=json`.

One Slack run that waits for an approval: every line is one JSON object; the run's life is
told at INFO (started, approval asked and decided, the tool's outcome and duration, answering,
ended) with the conversation and run ids on each of those lines; the HTTP clients' per-request
lines stay out at INFO and come back at DEBUG.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp

from bot.surfaces.slack.cards import APPROVE_ACTION
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.ops_api import OpsAPI, restart_then_answer
from tests.fakes.slack_api import FakeSlack
from tests.server.serve_process import SlackSender, serve_env, serving
from tests.server.test_processes import answered
from tests.slack.e2e import manifest, wait_card
from tests.slack.payloads import mention


def env_for(tmp_path: Path, ops: OpsAPI, slack: FakeSlack, llm: FakeOpenAI, **extra: str) -> Any:
    manifests = tmp_path / "manifests"
    manifests.mkdir(exist_ok=True)
    (manifests / "ops.yaml").write_text(manifest(ops.url))
    return serve_env(
        database_url=f"sqlite:///{tmp_path / 'chatops.db'}", manifests=manifests,
        slack_url=slack.url, llm_url=llm.base_url, **extra,
    )  # fmt: skip


async def one_approved_run(tmp_path: Path, env: dict[str, str], slack: FakeSlack) -> list[str]:
    event = mention("restart api", user="U0DEV")
    root = event["event"]["ts"]
    async with aiohttp.ClientSession() as http, serving(tmp_path, env) as bot:
        sender = SlackSender(http)
        assert await sender.send(bot, event) == 200
        card = await wait_card(slack, root, pending=True)
        assert await sender.click(bot, card, APPROVE_ACTION, user="U0LEAD") == 200
        await answered(slack, root)
        await bot.wait_log("ended done")
        await bot.stop()
        return list(bot.log)


async def test_json_lines_tell_the_runs_life_with_its_ids(
    tmp_path: Path, ops_api: OpsAPI, fake_slack: FakeSlack, fake_openai: FakeOpenAI
) -> None:
    fake_openai.respond_with(restart_then_answer)
    env = env_for(tmp_path, ops_api, fake_slack, fake_openai, chatops_log_format="json")
    lines = await one_approved_run(tmp_path, env, fake_slack)
    entries = [json.loads(line) for line in lines if line.strip()]  # every line is JSON
    assert all({"time", "level", "logger", "message"} <= e.keys() for e in entries)
    life = [e for e in entries if e.get("run_id")]
    said = " | ".join(e["message"] for e in life)
    for step in ("started for U0DEV in slack", "approval ", "asked: ops__restart",
                 ": approve by U0LEAD on slack: decided", "tool ops__restart: ok in",
                 "answering after", "ended done after"):  # fmt: skip
        assert step in said, step
    run_ids = {e["run_id"] for e in life}
    assert len(run_ids) == 1 and all(e.get("conversation_id") for e in life)
    assert not any("HTTP Request" in e["message"] for e in entries)
    assert "xoxb-" not in "".join(lines)  # the bot token, masked as everywhere


async def test_debug_lets_the_http_clients_speak(
    tmp_path: Path, ops_api: OpsAPI, fake_slack: FakeSlack, fake_openai: FakeOpenAI
) -> None:
    fake_openai.respond_with(restart_then_answer)
    env = env_for(tmp_path, ops_api, fake_slack, fake_openai, chatops_log_level="debug")
    lines = await one_approved_run(tmp_path, env, fake_slack)
    assert any("HTTP Request" in line for line in lines)
    assert any(" DEBUG " in line for line in lines)
    assert any("[conv=" in line and "run=" in line for line in lines)  # text: ids appended
