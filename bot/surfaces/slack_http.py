"""`POST /slack/events`: Events API callbacks are acked before bolt processes them.

Under a burst (hundreds of mentions at once) every request used to go through bolt's whole
middleware chain before its 200 went out, about 0.3 ms of the one event loop each, so the last
ack of a burst waited for the bolt work of all the others. Here an `event_callback` whose
signature checks out (slack_sdk's `SignatureVerifier`: HMAC and the five-minute timestamp window,
what bolt's own verification runs) is answered 200 at once and handed, untouched, to the
surface's queue, where bolt processes it exactly as before: verification, authorization, self
events, listeners. Everything else (interactivity, slash commands, url_verification, ssl_check,
a bad signature) goes through bolt inline, as before, so its response is bolt's; so does every
request until bolt has answered one (its first request is the one that calls `auth.test`, and
the events queued behind it would wait on that call after their ack).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping

from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response
from slack_bolt.async_app import AsyncApp
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_sdk.signature import SignatureVerifier

Defer = Callable[[Callable[[], Awaitable[object]]], None]


def events_route(
    bolt: AsyncApp, signing_secret: str, defer: Defer
) -> Callable[[web.Request], Awaitable[web.Response]]:
    """The aiohttp handler; `defer(work)` queues bolt's processing of a verified event."""
    verifier = SignatureVerifier(signing_secret)
    warm = False  # until bolt has answered once (its auth.test is cached), all goes inline

    async def slack_events(request: web.Request) -> web.Response:
        nonlocal warm
        try:
            body = (await request.read()).decode("utf-8")
        except UnicodeDecodeError:  # Slack sends UTF-8; this is not Slack (nor signed by it)
            return web.json_response({"error": "the request body is not UTF-8 text"}, status=400)
        headers = request.headers
        if (
            warm
            and _is_event_callback(headers, body)
            and verifier.is_valid(
                body,
                headers.get("X-Slack-Request-Timestamp", ""),
                headers.get("X-Slack-Signature", ""),
            )
        ):
            query = request.query_string
            defer(lambda: _process(bolt, body, query, headers))
            return web.Response()
        bolt_request = AsyncBoltRequest(body=body, query=request.query_string, headers=headers)  # type: ignore[arg-type]
        response = await bolt.async_dispatch(bolt_request)
        warm = warm or response.status == 200
        return await to_aiohttp_response(response)

    return slack_events


async def _process(bolt: AsyncApp, body: str, query: str, headers: Mapping[str, str]) -> None:
    """Bolt's full processing of an already acked event (its response goes nowhere)."""
    request = AsyncBoltRequest(body=body, query=query, headers=headers)  # type: ignore[arg-type]
    await bolt.async_dispatch(request)


def _is_event_callback(headers: Mapping[str, str], body: str) -> bool:
    if not headers.get("Content-Type", "").startswith("application/json"):
        return False
    try:
        payload = json.loads(body)
    except ValueError:
        return False
    return isinstance(payload, dict) and payload.get("type") == "event_callback"
