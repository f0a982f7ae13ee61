"""Run in a fresh interpreter by test_startup_imports.py: the app started on the fakes, one
Slack mention answered end to end (status, model call, streamed answer), and the modules that
request imported printed as a JSON list on the last line. The fakes run in this interpreter
too, so what they import on their first call is imported before the count starts."""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path

import aiohttp
from aiohttp.test_utils import TestServer

from bot.config import Settings
from bot.server import RUNTIME_KEY, create_app
from tests.fakes.openai_server import FakeOpenAI, answer
from tests.fakes.slack_api import BOT_TOKEN, FakeSlack
from tests.slack.payloads import SIGNING_SECRET, mention, signed_headers


async def main() -> list[str]:
    slack, llm = FakeSlack(), FakeOpenAI()
    await slack.start()
    await llm.start()
    llm.respond_with(lambda body: answer("All quiet." if body.get("stream") else "nothing to do"))
    "the fake counts Slack's text length in UTF-16".encode("utf-16-le")  # the fake's import
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "manifests").mkdir()
        settings = Settings(
            _env_file=None,
            database_url=f"sqlite:///{tmp}/bot.db",
            chatops_manifests_dir=Path(tmp) / "manifests",
            openai_base_url=llm.base_url,
            openai_api_key="sk-test-not-a-secret",
            chatops_llm_max_retries=0,
            slack_bot_token=BOT_TOKEN,
            slack_signing_secret=SIGNING_SECRET,
            slack_api_url=slack.url,
        )
        server = TestServer(create_app(settings))
        await server.start_server()
        before = set(sys.modules)
        body = json.dumps(mention("status of the api"))
        async with aiohttp.ClientSession() as http:
            url = server.make_url("/slack/events")
            async with http.post(url, data=body, headers=signed_headers(body)) as response:
                assert response.status == 200, response.status
        await slack.wait_for(lambda: slack.calls("chat.stopStream"), timeout=30)
        await server.app[RUNTIME_KEY].run_manager.wait_idle(30)  # type: ignore[attr-defined]
        imported = sorted(set(sys.modules) - before)
        await server.close()
    await slack.stop()
    await llm.stop()
    return imported


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main())))
