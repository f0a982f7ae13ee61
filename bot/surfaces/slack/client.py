"""The bot's Slack Web API client: slack_sdk's `AsyncWebClient`, counting every call.

Every Web API call the bot makes (the surface's, bolt's own `auth.test`, Socket Mode's
`apps.connections.open`) goes through `api_call`, so that is where calls and their final
failures are counted, by method (`bot.observability.metrics.PlatformMeter`). A 429 that
slack_sdk retries never reaches `api_call`: the rate-limit retry handler counts those
(`bot.surfaces.slack.limiter`); one still refused after the last retry is counted here.
"""

from __future__ import annotations

from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse

from bot.observability.metrics import PlatformMeter


class MeteredWebClient(AsyncWebClient):
    """`AsyncWebClient` whose every call is counted on `meter`."""

    def __init__(self, *args: Any, meter: PlatformMeter, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.meter = meter

    async def api_call(self, api_method: str, **kwargs: Any) -> AsyncSlackResponse:
        self.meter.call(api_method)
        try:
            return await super().api_call(api_method, **kwargs)
        except SlackApiError as exc:
            status = exc.response.status_code if exc.response is not None else 0
            if status == 429:  # refused after the last retry (the retried ones: the handler)
                self.meter.rate_limited(api_method)
            self.meter.error(api_method, error_kind(status))
            raise
        except (TimeoutError, aiohttp.ClientError):
            self.meter.error(api_method, "connection")
            raise


def error_kind(status: int) -> str:
    """rate_limited (429), server (5xx), api (Slack said `ok: false`, or another status)."""
    if status == 429:
        return "rate_limited"
    return "server" if status >= 500 else "api"
