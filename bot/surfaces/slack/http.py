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
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl

from aiohttp import ClientError, web
from slack_bolt.adapter.aiohttp import to_aiohttp_response
from slack_bolt.async_app import AsyncApp
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_sdk.errors import SlackClientError
from slack_sdk.signature import SignatureVerifier

from bot.chat.health import SurfaceHealth
from bot.errors import NotInstalled
from bot.surfaces.slack.identity import request_team

if TYPE_CHECKING:
    from bot.surfaces.slack.inbound import SlackInbound

log = logging.getLogger(__name__)


def events_route(
    bolt: AsyncApp, signing_secret: str, inbound: SlackInbound, health: SurfaceHealth
) -> Callable[[web.Request], Awaitable[web.Response]]:
    """The aiohttp handler: verified events to `inbound.accept_event`, the rest to bolt;
    while Slack is down (its token refused or Slack unreachable: `SurfaceHealth`) every signed
    request gets a short 503, which Slack retries, instead of a 500 and a traceback."""
    verifier = SignatureVerifier(signing_secret)

    async def slack_events(request: web.Request) -> web.Response:
        try:
            body = (await request.read()).decode("utf-8")
        except UnicodeDecodeError:  # Slack sends UTF-8; this is not Slack (nor signed by it)
            return web.json_response({"error": "the request body is not UTF-8 text"}, status=400)
        headers = request.headers
        if not _signed(verifier, body, headers):  # bolt would refuse it too, after parsing it
            return web.json_response({"error": "invalid request signature"}, status=401)
        down = health.refused("slack")
        if down is not None:
            return _unavailable(down)
        payload = _event_callback(headers, body)
        if payload is not None:
            inbound.learn_org(payload)
            try:
                me = await inbound.installation.identity(request_team(payload))
            except NotInstalled:  # nobody here to answer: acked, so Slack does not retry
                log.warning("slack: event for a workspace without an installation ignored")
                return web.Response()
            except (SlackClientError, ClientError, OSError, TimeoutError) as exc:
                log.warning("slack: event refused (503): auth.test failed: %s", type(exc).__name__)
                return _unavailable("Slack did not confirm the bot's identity")
            await inbound.accept_event(payload, me.bot_user_id)  # committed before the 200
            return web.Response()
        if not bolt_can_read(headers, body):
            # signed, yet not a shape bolt can read: it parses before any listener runs
            log.warning("slack: a signed request bolt cannot read was refused")
            return web.json_response({"error": "malformed Slack request"}, status=400)
        bolt_request = AsyncBoltRequest(body=body, query=request.query_string, headers=headers)  # type: ignore[arg-type]
        response = await bolt.async_dispatch(bolt_request)
        return await to_aiohttp_response(response)

    return slack_events


def _unavailable(reason: str) -> web.Response:
    """503 with a short body: Slack retries the request later."""
    return web.json_response({"error": f"slack is down: {reason}"}, status=503)


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


# what bolt reads of a request before any listener runs, and the types it assumes
_OBJECTS = ("event", "user", "team", "enterprise", "channel", "container", "message", "view")
_TEXTS = ("type", "team_id", "enterprise_id", "api_app_id", "user_id", "channel_id", "command")


def bolt_can_read(headers: Mapping[str, str], body: str) -> bool:
    """A signed body whose fields bolt reads have the types it assumes (a mapping where it
    expects one, text where it expects text): bolt would otherwise fail inside its own
    parsing, answering 500 with a traceback in the log."""
    if headers.get("Content-Type", "").startswith("application/json") or body.startswith("{"):
        try:
            payload: Any = json.loads(body)
        except ValueError:
            return False
    else:
        form = dict(parse_qsl(body, keep_blank_values=True))
        if "payload" not in form:
            return True  # a slash command: a flat form of strings
        try:
            payload = json.loads(form["payload"])
        except ValueError:
            return False
    if not isinstance(payload, dict):
        return False
    if any(k in payload and not isinstance(payload[k], dict | None) for k in _OBJECTS):
        return False
    if any(k in payload and not isinstance(payload[k], str | None) for k in _TEXTS):
        return False
    lists = (payload.get("actions"), payload.get("authorizations"))
    return all(
        v is None or (isinstance(v, list) and all(isinstance(i, dict) for i in v)) for v in lists
    )


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
