"""Socket Mode: with SLACK_APP_TOKEN the app opens a WebSocket (apps.connections.open) and
events pushed over it are acked and dispatched; without a signing secret no HTTP route exists."""

from __future__ import annotations

from aiohttp import web

from bot.config import Settings
from bot.storage.database import Database
from bot.surfaces.slack.inbound import SLACK_INBOUND_KEY, setup_slack
from tests.fakes.slack_api import APP_TOKEN, BOT_TOKEN, FakeSlack
from tests.slack.conftest import SurfaceRuntime
from tests.slack.payloads import mention


async def test_socket_mode_event_is_acked_and_dispatched(
    aiohttp_client, fake_slack: FakeSlack, inbox_db: Database
):
    settings = Settings(
        slack_bot_token=BOT_TOKEN, slack_app_token=APP_TOKEN, slack_api_url=fake_slack.url
    )
    runtime = SurfaceRuntime(settings=settings, db=inbox_db)
    app = web.Application()
    setup_slack(app, runtime.ports(), settings)
    client = await aiohttp_client(app)
    await fake_slack.wait_for(lambda: fake_slack.socket_connected)
    opened = fake_slack.calls("apps.connections.open")  # the start-up check, then the socket's
    assert len(opened) == 2
    assert all(call.headers["Authorization"] == f"Bearer {APP_TOKEN}" for call in opened)

    event = mention("what is failing?")
    await fake_slack.socket_send(
        {
            "envelope_id": "env-1",
            "type": "events_api",
            "accepts_response_payload": False,
            "retry_attempt": 0,
            "retry_reason": "",
            "payload": event,
        }
    )
    await fake_slack.wait_for(
        lambda: any(a.get("envelope_id") == "env-1" for a in fake_slack.socket_acks)
    )
    await app[SLACK_INBOUND_KEY].wait_idle(10)
    await fake_slack.wait_for(lambda: runtime.run_manager.dispatched)
    [msg] = runtime.run_manager.dispatched
    assert msg.text == "what is failing?"
    assert msg.event_id == event["event_id"]

    # no signing secret: the HTTP route is not mounted, so nothing can be forged over HTTP
    response = await client.post("/slack/events", data="{}")
    assert response.status == 404
    await runtime.inbox.close()
