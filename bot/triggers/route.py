"""`POST /hooks/<name>`: the aiohttp side of a trigger (the work is `bot.triggers.delivery`).

Answers 200 with what the delivery did (JSON) once everything it started is committed; a
refused delivery gets its 4xx and reason as JSON; opening a thread that fails (the chat
platform is down) is a 503, so the sender retries and the claim it left is let go.
"""

from __future__ import annotations

import logging

from aiohttp import web

from bot.triggers.auth import DeliveryRefused
from bot.triggers.delivery import Deliveries

log = logging.getLogger(__name__)

DELIVERIES_KEY = web.AppKey("trigger_deliveries", Deliveries)
MAX_DELIVERY_BYTES = 1024 * 1024  # Alertmanager truncates big groups; PagerDuty's are small


async def hook(request: web.Request) -> web.Response:
    """One delivery of the trigger named in the path."""
    name = request.match_info["name"]
    if request.content_length is not None and request.content_length > MAX_DELIVERY_BYTES:
        return web.json_response({"error": "body too large"}, status=413)
    body = await request.read()
    try:
        receipt = await request.app[DELIVERIES_KEY].receive(name, request.headers, body)
    except DeliveryRefused as refused:
        return web.json_response({"error": refused.reason}, status=refused.status)
    except Exception:  # noqa: BLE001 - the sender retries; the claim was let go
        log.exception("trigger %r: could not open the alert's thread", name)
        return web.json_response({"error": "could not open the thread; retry"}, status=503)
    return web.json_response(receipt.as_json())


def setup_triggers(app: web.Application, deliveries: Deliveries) -> None:
    """Mount `POST /hooks/{name}` (every trigger, armed or not: an unknown one is a 404)."""
    app[DELIVERIES_KEY] = deliveries
    app.router.add_post("/hooks/{name}", hook)
