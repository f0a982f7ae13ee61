"""`POST /slack/events`: a verified Events API callback is stored, then acknowledged.

An `event_callback` whose signature checks out (slack_sdk's `SignatureVerifier`: HMAC and the
five-minute timestamp window, what bolt's own verification runs) is parsed here and handed to
the inbox, and answered 200 once the inbox has committed it: a crash after the ack loses
nothing. Bolt's middleware chain (about 0.3 ms of the one event loop per request) is skipped
for these; what it would add is done by the parser (the bot's own messages are dropped).
Everything else (interactivity, slash commands, url_verification, ssl_check, a bad signature)
goes through bolt inline, so its response is bolt's; so does every request until bolt has
answered one and the bot's user id is known (bolt's first request calls `auth.test`).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response
from slack_bolt.async_app import AsyncApp
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_sdk.signature import SignatureVerifier

if TYPE_CHECKING:
    from bot.surfaces.slack import SlackInbound


def events_route(
    bolt: AsyncApp, signing_secret: str, inbound: SlackInbound
) -> Callable[[web.Request], Awaitable[web.Response]]:
    """The aiohttp handler: verified events to `inbound.accept_event`, the rest to bolt."""
    verifier = SignatureVerifier(signing_secret)

    async def slack_events(request: web.Request) -> web.Response:
        try:
            body = (await request.read()).decode("utf-8")
        except UnicodeDecodeError:  # Slack sends UTF-8; this is not Slack (nor signed by it)
            return web.json_response({"error": "the request body is not UTF-8 text"}, status=400)
        headers = request.headers
        bot_user_id = inbound.bot_user_id
        payload = _event_callback(headers, body) if bot_user_id else None
        if payload is not None and _signed(verifier, body, headers):
            await inbound.accept_event(payload, bot_user_id or "")  # committed before the 200
            return web.Response()
        bolt_request = AsyncBoltRequest(body=body, query=request.query_string, headers=headers)  # type: ignore[arg-type]
        response = await bolt.async_dispatch(bolt_request)
        return await to_aiohttp_response(response)

    return slack_events


def _signed(verifier: SignatureVerifier, body: str, headers: Mapping[str, str]) -> bool:
    """The v0 signature and a fresh timestamp; a timestamp that is not a number is unsigned."""
    try:
        return verifier.is_valid(
            body,
            headers.get("X-Slack-Request-Timestamp", ""),
            headers.get("X-Slack-Signature", ""),
        )
    except ValueError:
        return False


def _event_callback(headers: Mapping[str, str], body: str) -> dict[str, Any] | None:
    if not headers.get("Content-Type", "").startswith("application/json"):
        return None
    try:
        payload = json.loads(body)
    except ValueError:
        return None
    if isinstance(payload, dict) and payload.get("type") == "event_callback":
        return payload
    return None
