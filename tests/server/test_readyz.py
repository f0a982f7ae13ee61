"""`GET /readyz` names each check: the database (reachable and migrated to the newest
revision: else 503), the model endpoint (configured and answering, asked at most once per
cache period; down is reported, the bot stays ready) and every surface: checking while its
start-up check waits, retried while the platform answers 5xx, and down with a 503 for signed
events only (a forged request is still a 401)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from sqlalchemy import text

from bot.chat.health import SurfaceHealth
from bot.config import Settings
from bot.server import RUNTIME_KEY, create_app
from bot.storage import migrate
from bot.surfaces.slack.limiter import SERVER_ERROR_RETRIES
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_api import BOT_TOKEN, FakeSlack
from tests.server.conftest import llm_settings
from tests.server.serve_process import free_port
from tests.slack.payloads import SIGNING_SECRET, as_body, mention, signed_headers


async def test_every_check_is_named_and_the_model_is_asked_once_per_period(
    aiohttp_client, make_settings, fake_openai: FakeOpenAI
) -> None:
    client = await aiohttp_client(create_app(make_settings(**llm_settings(fake_openai))))
    for _ in range(3):
        response = await client.get("/readyz")
        assert response.status == 200
    body = await response.json()
    assert body["ready"] is True
    assert body["database"] == {"ok": True, "revision": migrate.head_revision()}
    assert body["model"] == {"ok": True, "model": "fake-model"}
    assert body["surfaces"] == {"console": {"ok": True}}
    assert fake_openai.models_asked == 1  # cached: polling /readyz costs the provider nothing


async def test_a_model_endpoint_that_is_down_is_reported_and_the_bot_stays_ready(
    aiohttp_client, make_settings
) -> None:
    nowhere = f"http://127.0.0.1:{free_port()}/v1"
    settings = make_settings(openai_base_url=nowhere, openai_api_key="sk-test-xyz-secret")
    client = await aiohttp_client(create_app(settings))
    response = await client.get("/readyz")
    body = await response.json()
    assert response.status == 200 and body["ready"] is True
    assert body["model"]["ok"] is False
    assert body["model"]["reason"].startswith("unreachable: ")
    assert body["model"]["reason"].endswith("(check OPENAI_BASE_URL)")
    assert "sk-test-xyz-secret" not in await response.text()


async def test_a_refused_model_key_names_openai_api_key(
    aiohttp_client, make_settings, fake_openai: FakeOpenAI
) -> None:
    settings = make_settings(openai_base_url=fake_openai.base_url, openai_api_key=None)
    client = await aiohttp_client(create_app(settings))
    body = await (await client.get("/readyz")).json()
    assert body["model"]["reason"] == "refused the key (HTTP 401; check OPENAI_API_KEY)"


async def test_no_model_configured_is_said(aiohttp_client, make_settings) -> None:
    client = await aiohttp_client(create_app(make_settings()))
    body = await (await client.get("/readyz")).json()
    assert body["model"] == {
        "ok": False, "reason": "LLM not configured: set OPENAI_API_KEY or OPENAI_BASE_URL"
    }  # fmt: skip
    assert body["ready"] is True


async def test_a_database_behind_the_code_is_not_ready(
    aiohttp_client, make_settings, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    client = await aiohttp_client(create_app(make_settings(**llm_settings(fake_openai))))
    engine = client.app[RUNTIME_KEY].engine
    with engine.begin() as conn:  # as if an older release's database were restored under us
        conn.execute(text("UPDATE alembic_version SET version_num = '0001_initial'"))
    response = await client.get("/readyz")
    body = await response.json()
    assert response.status == 503 and body["ready"] is False
    head = migrate.head_revision()
    assert body["database"] == {
        "ok": False, "reason": f"not migrated: at revision 0001_initial, the code needs {head}"
    }  # fmt: skip


def slack_settings(make_settings, fake_slack: FakeSlack, **values: object) -> Settings:
    base = {"slack_bot_token": BOT_TOKEN, "slack_signing_secret": SIGNING_SECRET}
    return make_settings(**(base | {"slack_api_url": fake_slack.url} | values))


async def slack_state(client) -> dict:
    return (await (await client.get("/readyz")).json())["surfaces"]["slack"]


async def test_slack_answering_5xx_at_start_is_retried_until_it_signs_in(
    aiohttp_client, make_settings, fake_slack: FakeSlack
) -> None:
    """A 502 burst longer than the client's own retries (about 8 s) is Slack unwell, not a
    refused token: reported, retried in the background, then signed in."""
    fake_slack.fail_next("auth.test", status=502, count=SERVER_ERROR_RETRIES + 1)
    client = await aiohttp_client(create_app(slack_settings(make_settings, fake_slack)))
    runtime = client.app[RUNTIME_KEY]
    unwell = "unreachable: HTTP 502 (retrying; check SLACK_API_URL)"
    seen: list[str] = []

    def settled(health: SurfaceHealth) -> bool:
        seen.append(health.state("slack").reason)
        return health.state("slack").ok

    await asyncio.wait_for(runtime.health.wait_until(settled), 30)
    assert unwell in seen  # reported as down meanwhile
    assert len(fake_slack.calls("auth.test")) == SERVER_ERROR_RETRIES + 2
    assert await slack_state(client) == {"ok": True}


async def test_slack_is_checking_until_auth_test_answers(
    aiohttp_client, make_settings, fake_slack: FakeSlack
) -> None:
    fake_slack.hold("auth.test")
    client = await aiohttp_client(create_app(slack_settings(make_settings, fake_slack)))
    await fake_slack.wait_for(lambda: fake_slack.held("auth.test"))
    assert await slack_state(client) == {"ok": False, "reason": "checking credentials"}
    fake_slack.release()
    runtime = client.app[RUNTIME_KEY]
    await asyncio.wait_for(runtime.health.wait_until(lambda h: h.state("slack").ok), 30)


async def test_while_slack_is_down_an_unsigned_request_is_still_401(
    aiohttp_client, make_settings, fake_slack: FakeSlack
) -> None:
    """An attacker learns nothing of the outage: the signature is checked first."""
    settings = slack_settings(make_settings, fake_slack, slack_bot_token="xoxb-wrong")
    client = await aiohttp_client(create_app(settings))
    runtime = client.app[RUNTIME_KEY]
    await asyncio.wait_for(runtime.health.wait_until(lambda h: h.refused("slack")), 30)
    body = as_body(mention("hi"))
    forged = await client.post(
        "/slack/events", data=body, headers=signed_headers(body, secret="forged")
    )
    assert forged.status == 401 and "invalid_auth" not in await forged.text()
    signed = await client.post("/slack/events", data=body, headers=signed_headers(body))
    assert signed.status == 503
    assert await signed.json() == {"error": "slack is down: invalid_auth (check SLACK_BOT_TOKEN)"}
