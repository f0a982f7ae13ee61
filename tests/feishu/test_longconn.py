"""Long-connection mode: lark-oapi's websocket client, in its own thread, against FakeFeishu's
websocket endpoint; and the SDK's own event objects fed to the same handlers from a thread."""

from __future__ import annotations

import asyncio
import json

import pytest
from lark_oapi.api.im.v1 import P2ImMessageReceiveV1
from lark_oapi.event.callback.model.p2_card_action_trigger import P2CardActionTrigger

from bot.server import RUNTIME_KEY, create_app
from bot.surfaces.feishu.surface import FEISHU_KEY
from tests.fakes.feishu_api import FakeFeishu
from tests.fakes.openai_server import FakeOpenAI
from tests.feishu.e2e import (
    DEV,
    LEAD,
    OpsAPI,
    approval_message,
    bot_settings,
    has_form,
    manifest,
    markdown_of,
    restart_then_answer,
    status_message,
    title,
)


@pytest.fixture
async def client(aiohttp_client, tmp_path, ops_api, fake_feishu, fake_openai):
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    (manifests / "ops.yaml").write_text(manifest(ops_api.url))
    settings = bot_settings(
        database_url=f"sqlite:///{tmp_path / 'chatops.db'}",
        manifests=manifests,
        fake=fake_feishu,
        llm_url=fake_openai.base_url,
        feishu_mode="longconn",
        feishu_verification_token=None,
        feishu_encrypt_key=None,
    )
    return await aiohttp_client(create_app(settings))


async def wait_pending_card(fake: FakeFeishu, root: str):
    def find(f: FakeFeishu):
        message = approval_message(f, root)
        return message if message and has_form(message.content) else None

    return await fake.wait_for(find, 15)


async def test_events_and_card_clicks_over_the_websocket(
    client, fake_feishu: FakeFeishu, fake_openai: FakeOpenAI, ops_api: OpsAPI
):
    fake_openai.respond_with(restart_then_answer)
    # no webhook route in long-connection mode
    assert (await client.post("/feishu/events", data=b"{}")).status == 404

    event = fake_feishu.message_event("restart the api", user=DEV)
    root = event["event"]["message"]["message_id"]
    ack = await fake_feishu.push_ws(event)
    assert ack["code"] == 200
    assert fake_feishu.calls("ws.endpoint")  # the SDK asked the fake for its websocket

    card = await wait_pending_card(fake_feishu, root)
    unauthorised = await fake_feishu.push_ws(
        fake_feishu.card_action(card.message_id, "approve", user="ou_random")
    )
    assert unauthorised["data"]["toast"]["type"] == "error"
    assert "card" not in unauthorised["data"]

    reply = await fake_feishu.push_ws(
        fake_feishu.card_action(card.message_id, "approve", user=LEAD)
    )
    assert reply["code"] == 200
    assert reply["data"]["toast"]["type"] == "success"
    assert title(reply["data"]["card"]["data"]).startswith("Approved")
    await client.app[RUNTIME_KEY].run_manager.wait_idle(15)
    assert ops_api.restarts == ["api"]
    assert title(status_message(fake_feishu, root).content) == "Done"
    assert "## Restarted" in markdown_of(fake_feishu.replies_to(root)[-1].content)

    connection = client.app[FEISHU_KEY].longconn
    assert connection is not None and connection.running
    await client.close()  # the app's cleanup stops the websocket thread
    assert not connection.running


async def test_sdk_event_objects_fed_to_the_handlers_from_a_thread(
    client, fake_feishu: FakeFeishu, fake_openai: FakeOpenAI, ops_api: OpsAPI
):
    """What the websocket client does on each frame: build the SDK object, call the handler."""
    fake_openai.respond_with(restart_then_answer)
    surface = client.app[FEISHU_KEY]
    event = fake_feishu.message_event("restart the api", user=DEV)
    root = event["event"]["message"]["message_id"]
    message = P2ImMessageReceiveV1(event)
    await asyncio.to_thread(surface.handle_message_event, message)
    await asyncio.to_thread(surface.handle_message_event, P2ImMessageReceiveV1(event))  # dup

    card = await wait_pending_card(fake_feishu, root)
    click = P2CardActionTrigger(
        fake_feishu.card_action(card.message_id, "reject", user=LEAD, reason="use a canary")
    )
    response = await asyncio.to_thread(surface.handle_card_action, click)
    assert response.toast.type == "success"
    assert response.card.type == "raw"
    assert "use a canary" in json.dumps(response.card.data)
    await client.app[RUNTIME_KEY].run_manager.wait_idle(15)
    assert ops_api.restarts == []
    statuses = [r for r in fake_feishu.replies_to(root) if r.msg_type == "interactive"]
    assert sum(title(r.content) in ("Done", "Failed") for r in statuses) == 1  # one run only


async def test_refused_credentials_open_no_long_connection(
    aiohttp_client, tmp_path, fake_feishu: FakeFeishu, fake_openai: FakeOpenAI
):
    """A wrong secret in long-connection mode: Feishu is down (said once, in /readyz) and
    the SDK's client is never started (it would reconnect forever, failing each time)."""
    settings = bot_settings(
        database_url=f"sqlite:///{tmp_path / 'chatops.db'}",
        manifests=tmp_path,
        fake=fake_feishu,
        llm_url=fake_openai.base_url,
        feishu_mode="longconn",
        feishu_verification_token=None,
        feishu_encrypt_key=None,
        feishu_app_secret="wrong-secret",
    )
    client = await aiohttp_client(create_app(settings))
    health = client.app[RUNTIME_KEY].health
    await asyncio.wait_for(health.wait_until(lambda h: h.refused("feishu")), 30)
    surface = client.app[FEISHU_KEY]
    assert surface.longconn is None and fake_feishu.calls("ws.endpoint") == []
    body = await (await client.get("/readyz")).json()
    assert body["surfaces"]["feishu"]["reason"].endswith(
        "(check FEISHU_APP_ID and FEISHU_APP_SECRET)"
    )
