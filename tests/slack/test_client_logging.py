"""At INFO the Slack client builds no debug line: slack_sdk formats a Web API call's whole
request and response for one whenever its logger's own level is unset (it reads
`logger.level`, not `isEnabledFor`), and the handler then drops it. `configure_logging` gives
those loggers their level; at DEBUG the lines come back."""

from __future__ import annotations

import logging

import pytest

from bot.observability.logs import configure_logging
from bot.observability.metrics import Metrics
from bot.surfaces.slack.client import MeteredWebClient
from tests.fakes.slack_api import BOT_TOKEN, FakeSlack


class Watched(str):
    """Message text that counts how often something formats it for a log line."""

    formatted = 0

    def __repr__(self) -> str:
        Watched.formatted += 1
        return super().__repr__()


async def post(fake_slack: FakeSlack) -> None:
    client = MeteredWebClient(
        token=BOT_TOKEN, base_url=fake_slack.url, meter=Metrics().platform("slack")
    )
    Watched.formatted = 0
    response = await client.chat_postMessage(channel="C1", text=Watched("deploying"))
    assert response["ok"]


@pytest.mark.parametrize(("level", "formats"), [("INFO", False), ("DEBUG", True)])
async def test_a_web_api_call_is_formatted_for_the_log_only_at_debug(
    fake_slack: FakeSlack, level: str, formats: bool
) -> None:
    configure_logging(level)
    await post(fake_slack)
    assert (Watched.formatted > 0) is formats


async def test_unconfigured_the_sdk_formats_every_call(fake_slack: FakeSlack) -> None:
    """What the level guards against (and the check above would miss were it gone)."""
    logging.getLogger("slack_sdk.web.async_base_client").setLevel(logging.NOTSET)
    await post(fake_slack)
    assert Watched.formatted > 0
