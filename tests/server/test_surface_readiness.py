"""Issue 28 item 1 through a real `chatops serve` process: a surface whose credentials the
platform refuses is reported once, at start, and by `/readyz`; its events get a clean 503
(the platform retries), never a 500 and a traceback; the other surfaces keep serving.
"""

from __future__ import annotations

from pathlib import Path

import aiohttp
import pytest

from tests.fakes.feishu_api import FakeFeishu
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_api import BOT_TOKEN, FakeSlack
from tests.server.serve_process import (
    SlackSender,
    feishu_serve_env,
    free_port,
    serve_env,
    serving,
)
from tests.slack.payloads import mention

WRONG_TOKEN = "xoxb-wrong-token-0a1b2c3d"


@pytest.fixture
def manifests(tmp_path: Path) -> Path:
    """An empty manifests folder: these tests are about the surfaces, not the connectors."""
    folder = tmp_path / "manifests"
    folder.mkdir()
    return folder


async def readyz(http: aiohttp.ClientSession, url: str) -> tuple[int, dict]:
    async with http.get(f"{url}/readyz") as response:
        return response.status, await response.json()


async def test_a_refused_slack_token_is_one_line_a_503_per_event_and_reported_by_readyz(
    tmp_path: Path,
    manifests: Path,
    database_url: str,
    fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
) -> None:
    env = serve_env(
        database_url=database_url, manifests=manifests, slack_url=fake_slack.url,
        llm_url=fake_openai.base_url, slack_bot_token=WRONG_TOKEN,
    )  # fmt: skip
    async with aiohttp.ClientSession() as http, serving(tmp_path, env) as bot:
        line = await bot.wait_log("SLACK_BOT_TOKEN", 30)
        assert "invalid_auth" in line and WRONG_TOKEN not in line
        status, body = await readyz(http, bot.url)
        assert status == 200 and body["ready"] is True
        assert body["surfaces"]["slack"] == {
            "ok": False, "reason": "invalid_auth (check SLACK_BOT_TOKEN)"
        }  # fmt: skip
        assert body["surfaces"]["console"] == {"ok": True}
        for _ in range(3):  # each event: a 503 Slack retries, no traceback
            assert await SlackSender(http).send(bot, mention("hello")) == 503
        async with http.get(f"{bot.url}/healthz") as response:
            assert response.status == 200
        assert await bot.stop() == 0
    logged = "".join(bot.log)
    assert "Traceback" not in logged and "SlackApiError" not in logged, logged
    assert sum("SLACK_BOT_TOKEN" in line for line in bot.log) == 1, logged
    assert WRONG_TOKEN not in logged


async def test_a_good_token_makes_slack_ready_and_names_every_check(
    tmp_path: Path,
    manifests: Path,
    database_url: str,
    fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
) -> None:
    env = serve_env(
        database_url=database_url, manifests=manifests, slack_url=fake_slack.url,
        llm_url=fake_openai.base_url,
    )  # fmt: skip
    async with aiohttp.ClientSession() as http, serving(tmp_path, env) as bot:
        await fake_slack.wait_for(lambda: fake_slack.calls("auth.test"), 30)
        await bot.wait_log("slack: signed in", 30)
        status, body = await readyz(http, bot.url)
        assert status == 200 and body["ready"] is True, body
        assert body["surfaces"]["slack"] == {"ok": True}
        assert body["database"] == {"ok": True, "revision": body["database"]["revision"]}
        assert body["model"]["ok"] is True, body
        assert await bot.stop() == 0
    assert BOT_TOKEN not in "".join(bot.log)


async def test_slack_unreachable_at_start_is_retried_in_the_background(
    tmp_path: Path, manifests: Path, database_url: str, fake_openai: FakeOpenAI
) -> None:
    nowhere = f"http://127.0.0.1:{free_port()}/api/"  # nothing listens there
    env = serve_env(
        database_url=database_url, manifests=manifests, slack_url=nowhere,
        llm_url=fake_openai.base_url,
    )  # fmt: skip
    async with aiohttp.ClientSession() as http, serving(tmp_path, env) as bot:
        line = await bot.wait_log("SLACK_BOT_TOKEN", 30)
        assert "unreachable" in line and "retrying" in line
        status, body = await readyz(http, bot.url)
        assert status == 200 and body["surfaces"]["slack"]["ok"] is False
        assert "unreachable" in body["surfaces"]["slack"]["reason"]
        assert await SlackSender(http).send(bot, mention("hello")) == 503
        assert await bot.stop() == 0
    assert "Traceback" not in "".join(bot.log)


async def test_a_refused_socket_mode_token_names_slack_app_token(
    tmp_path: Path,
    manifests: Path,
    database_url: str,
    fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
) -> None:
    env = serve_env(
        database_url=database_url, manifests=manifests, slack_url=fake_slack.url,
        llm_url=fake_openai.base_url, slack_app_token="xapp-wrong-0a1b2c",
    )  # fmt: skip
    async with aiohttp.ClientSession() as http, serving(tmp_path, env) as bot:
        line = await bot.wait_log("SLACK_APP_TOKEN", 30)
        assert "invalid_auth" in line and "xapp-wrong" not in line
        status, body = await readyz(http, bot.url)
        assert status == 200
        assert body["surfaces"]["slack"] == {
            "ok": False, "reason": "invalid_auth (check SLACK_APP_TOKEN)"
        }  # fmt: skip
        assert await bot.stop() == 0
    assert "Traceback" not in "".join(bot.log)


async def test_a_refused_feishu_secret_is_one_line_a_503_per_push_and_reported_by_readyz(
    tmp_path: Path,
    manifests: Path,
    database_url: str,
    fake_feishu: FakeFeishu,
    fake_openai: FakeOpenAI,
) -> None:
    env = feishu_serve_env(
        database_url=database_url, manifests=manifests, fake=fake_feishu,
        llm_url=fake_openai.base_url,
    ) | {"FEISHU_APP_SECRET": "wrong-app-secret-9f8e7d"}  # fmt: skip
    async with aiohttp.ClientSession() as http, serving(tmp_path, env) as bot:
        line = await bot.wait_log("FEISHU_APP_SECRET", 30)
        assert "app secret invalid (code 10014)" in line and "wrong-app-secret" not in line
        status, body = await readyz(http, bot.url)
        assert status == 200 and body["ready"] is True
        assert body["surfaces"]["feishu"] == {
            "ok": False,
            "reason": "app secret invalid (code 10014) (check FEISHU_APP_ID and FEISHU_APP_SECRET)",
        }
        async with http.post(f"{bot.url}/feishu/events", json={"encrypt": "x"}) as response:
            assert response.status == 503  # Feishu pushes it again later
            assert await response.json() == {"error": "feishu is down (see /readyz)"}
        assert await bot.stop() == 0
    logged = "".join(bot.log)
    assert "Traceback" not in logged and "wrong-app-secret" not in logged, logged
    assert sum("FEISHU_APP_SECRET" in line for line in bot.log) == 1, logged


async def test_accepted_feishu_credentials_make_feishu_ready(
    tmp_path: Path,
    manifests: Path,
    database_url: str,
    fake_feishu: FakeFeishu,
    fake_openai: FakeOpenAI,
) -> None:
    env = feishu_serve_env(
        database_url=database_url, manifests=manifests, fake=fake_feishu,
        llm_url=fake_openai.base_url,
    )  # fmt: skip
    async with aiohttp.ClientSession() as http, serving(tmp_path, env) as bot:
        await bot.wait_log("feishu: signed in", 30)
        status, body = await readyz(http, bot.url)
        assert status == 200 and body["surfaces"] == {
            "console": {"ok": True},
            "feishu": {"ok": True},
        }
        assert await bot.stop() == 0
