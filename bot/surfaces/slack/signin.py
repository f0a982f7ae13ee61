"""Slack proves the bot's credentials at start-up: `auth.test` with SLACK_BOT_TOKEN, then (in
Socket Mode) `apps.connections.open` with SLACK_APP_TOKEN and the socket itself.

A refusal (`invalid_auth`, `account_inactive`, ...) marks Slack down for this process with
Slack's error and the variable to check; Slack unreachable (a refused connection, a timeout, a
5xx or a 429) is retried in the background (`bot.chat.signin.SignIn`). The token itself is
never logged.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError

from bot.chat.health import SurfaceHealth
from bot.chat.signin import CredentialsRefused, PlatformUnreachable, SignIn, short_reason
from bot.surfaces.slack.identity import SlackInstallation

NAME = "slack"
_NETWORK = (aiohttp.ClientError, asyncio.TimeoutError, OSError, SlackClientError)


def slack_sign_in(
    installation: SlackInstallation,
    health: SurfaceHealth,
    *,
    connect_socket: Callable[[], Awaitable[None]] | None = None,
) -> SignIn:
    """The start-up check of the Slack surface (start it once the loop runs)."""

    async def attempt() -> None:
        await _checked(installation.identity, "SLACK_BOT_TOKEN")
        if connect_socket is not None:
            await _checked(connect_socket, "SLACK_APP_TOKEN")

    return SignIn(NAME, attempt, health, what="SLACK_BOT_TOKEN")


async def _checked(call: Callable[[], Awaitable[object]], variable: str) -> None:
    """`call()`, its failures said as a refusal of `variable` or Slack unreachable."""
    try:
        await call()
    except SlackApiError as exc:
        status = getattr(exc.response, "status_code", 200)
        if status >= 500 or status == 429:
            raise PlatformUnreachable(f"HTTP {status}", "SLACK_API_URL") from None
        try:
            error = str(exc.response.get("error") or f"HTTP {status}")
        except Exception:  # noqa: BLE001 - a body that is not JSON: the status says it
            error = f"HTTP {status}"
        raise CredentialsRefused(variable, error) from None
    except _NETWORK as exc:
        raise PlatformUnreachable(short_reason(exc), "SLACK_API_URL") from None
