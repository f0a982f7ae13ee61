"""Slack's start-up log holds nothing alarming that is not: bolt's "token will be unused"."""

from __future__ import annotations

import logging

import pytest

from bot.server import create_app
from tests.fakes.slack_api import BOT_TOKEN, FakeSlack
from tests.slack.e2e import bot_settings


async def test_a_slack_start_up_says_no_token_will_be_unused(
    tmp_path, database_url: str, fake_slack: FakeSlack, aiohttp_client,
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    """SLACK_BOT_TOKEN is in the environment, as in production: bolt reads it by itself and
    warned, at every start, that it "will be unused" (it is the client's own token)."""
    monkeypatch.setenv("SLACK_BOT_TOKEN", BOT_TOKEN)
    settings = bot_settings(
        database_url=database_url, manifests=tmp_path, slack=fake_slack,
        llm_url="http://127.0.0.1:9/v1",
    )  # fmt: skip
    with caplog.at_level(logging.INFO):
        await aiohttp_client(create_app(settings))
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert not any("will be unused" in line for line in said), said
    assert any("slack" in r.getMessage().lower() for r in caplog.records)  # it did start
