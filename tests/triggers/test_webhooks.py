"""Triggers end to end: signed webhook deliveries POSTed to `/hooks/<name>` of the real app
(`bot.server.create_app`) open a thread in FakeSlack and a run that asks for approval.

The runtime, inbox, run manager, broker and the ops connector are real; the model is FakeOpenAI.
Every test runs on SQLite and PostgreSQL. Alertmanager and PagerDuty bodies are in their
published shapes (tests/triggers/payloads.py).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func
from sqlmodel import select

from bot.server import RUNTIME_KEY, create_app
from bot.storage.models import InboxEvent, ProcessedEvent, Run, TriggerAlert
from bot.surfaces.slack.cards import APPROVE_ACTION
from bot.triggers.auth import (
    PAGERDUTY_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    sign_hmac,
    sign_pagerduty,
)
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_api import FakeSlack
from tests.slack.e2e import OpsAPI, SlackBot, bot_settings, restart_then_answer, wait_card
from tests.slack.payloads import CHANNEL, message
from tests.triggers.payloads import (
    ALERTMANAGER_TRIGGER,
    AM_TOKEN,
    HMAC_SECRET,
    HMAC_TRIGGER,
    PAGERDUTY_TRIGGER,
    PD_SECRET,
    alertmanager,
    body,
    pagerduty,
)

pytestmark = pytest.mark.both_databases


@pytest.fixture
async def bot(
    database_url, aiohttp_client, tmp_path: Path, monkeypatch, ops_api: OpsAPI,
    fake_slack: FakeSlack, fake_openai: FakeOpenAI,
) -> SlackBot:  # fmt: skip
    return await start_bot(
        database_url, aiohttp_client, tmp_path, monkeypatch, ops_api, fake_slack, fake_openai
    )


async def start_bot(
    database_url: str, aiohttp_client: Any, tmp_path: Path, monkeypatch: Any, ops_api: OpsAPI,
    fake_slack: FakeSlack, fake_openai: FakeOpenAI,
) -> SlackBot:  # fmt: skip
    """The real app with the three test triggers armed (another call: a second process's app
    on the same database)."""
    from tests.fakes.ops_api import ops_manifest

    manifests, triggers = tmp_path / "manifests", tmp_path / "triggers"
    manifests.mkdir(exist_ok=True)
    triggers.mkdir(exist_ok=True)
    manifest = ops_manifest(ops_api.url, approvers=("U0LEAD",))  # four-eyes on `restart`:
    manifest = manifest.replace("risk: high", "risk: high\n    allow_self_approval: false")
    (manifests / "ops.yaml").write_text(manifest)
    (triggers / "alertmanager.yaml").write_text(ALERTMANAGER_TRIGGER)
    (triggers / "pagerduty.yaml").write_text(PAGERDUTY_TRIGGER)
    (triggers / "deploys.yaml").write_text(HMAC_TRIGGER)
    monkeypatch.setenv("AM_WEBHOOK_TOKEN", AM_TOKEN)
    monkeypatch.setenv("PD_WEBHOOK_SECRET", PD_SECRET)
    monkeypatch.setenv("DEPLOY_HOOK_SECRET", HMAC_SECRET)
    settings = bot_settings(
        database_url=database_url, manifests=manifests, slack=fake_slack,
        llm_url=fake_openai.base_url, chatops_triggers_dir=triggers,
        chatops_approver_groups={"oncall": ["U0LEAD", "U0ONCALL"]},
    )  # fmt: skip
    fake_openai.respond_with(restart_then_answer)
    return SlackBot(await aiohttp_client(create_app(settings)), fake_slack)


async def deliver(bot: SlackBot, name: str, raw: bytes, headers: dict[str, str]) -> tuple[int, Any]:
    response = await bot.client.post(
        f"/hooks/{name}", data=raw, headers={"Content-Type": "application/json", **headers}
    )
    return response.status, await response.json()


def am_headers(token: str = AM_TOKEN) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", "User-Agent": "Alertmanager/0.27.0"}


def pd_headers(raw: bytes, secret: str = PD_SECRET) -> dict[str, str]:
    return {PAGERDUTY_HEADER: f"v1=0000,{sign_pagerduty(secret, raw)}", "X-Webhook-Id": "W1"}


def thread_roots(fake: FakeSlack) -> list[dict[str, Any]]:
    """Messages the bot posted at the top of the channel (each one a thread's root)."""
    return [m for (ch, _), m in fake.messages.items() if ch == CHANNEL and not m.get("thread_ts")]


async def stored(bot: SlackBot) -> dict[str, int]:
    """Rows a delivery could have stored: alert claims, inbox rows, dedupe rows, runs."""

    def count(session: Any) -> dict[str, int]:
        tables = {
            "alerts": TriggerAlert,
            "inbox": InboxEvent,
            "dedupe": ProcessedEvent,
            "runs": Run,
        }
        return {
            key: session.exec(select(func.count()).select_from(model)).one()
            for key, model in tables.items()
        }

    return await bot.app[RUNTIME_KEY].db.run(count)


async def settle(bot: SlackBot) -> None:
    await bot.app[RUNTIME_KEY].inbox.wait_idle(15)


async def test_alertmanager_alert_opens_a_thread_and_a_run_that_asks_for_approval(
    bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, ops_api: OpsAPI
):
    status, receipt = await deliver(bot, "alertmanager", body(alertmanager()), am_headers())
    assert (status, receipt["started"]) == (200, 1)

    [root] = thread_roots(fake_slack)
    assert root["text"].startswith("[FIRING] HighErrorRate on api: 5xx above 5%")
    card = await wait_card(fake_slack, root["ts"], pending=True)
    assert "ops.restart" in json.dumps(card["blocks"])
    assert ops_api.restarts == []
    [run] = [r for r in (await bot.app[RUNTIME_KEY].db.run(lambda s: s.exec(select(Run)).all()))]
    assert run.requester == "trigger:alertmanager"
    assert run.query == "restart api: HighErrorRate is firing"
    first_call = next(b for b in fake_openai.requests if not b.get("stream"))
    offered = {tool["function"]["name"] for tool in first_call.get("tools", [])}
    assert offered and all(name.startswith("ops__") for name in offered)  # `connectors: [ops]`

    # an ordinary conversation from here: a reply interrupts the run, the approver approves
    reply = message("and check the error budget", user="U0DEV", thread_ts=root["ts"])
    assert await bot.send(reply) == 200
    assert await bot.click(card, APPROVE_ACTION, user="U0LEAD") == 200
    await bot.wait_idle()
    assert ops_api.restarts == ["api"]
    later = [json.dumps(b["messages"]) for b in fake_openai.requests if not b.get("stream")]
    assert any("and check the error budget" in m for m in later)


async def test_resolved_alert_is_told_in_its_thread_and_stops_its_run(
    bot: SlackBot, fake_slack: FakeSlack
):
    await deliver(bot, "alertmanager", body(alertmanager()), am_headers())
    [root] = thread_roots(fake_slack)
    await wait_card(fake_slack, root["ts"], pending=True)

    status, receipt = await deliver(
        bot, "alertmanager", body(alertmanager("resolved")), am_headers()
    )
    assert (status, receipt["resolved"]) == (200, 1)
    await bot.wait_idle()
    texts = [m["text"] for m in fake_slack.thread_messages(CHANNEL, root["ts"])]
    assert any(t.startswith("Resolved: [RESOLVED] HighErrorRate") for t in texts)
    runs = await bot.app[RUNTIME_KEY].db.run(lambda s: s.exec(select(Run)).all())
    assert [r.stopped_by for r in runs] == ["trigger:alertmanager"]
    again = await deliver(bot, "alertmanager", body(alertmanager("resolved")), am_headers())
    assert again == (200, {"started": 0, "duplicates": 0, "resolved": 0, "ignored": 0})
    assert len(thread_roots(fake_slack)) == 1


async def test_pagerduty_incident_opens_a_thread_its_on_call_group_cannot_self_approve(
    bot: SlackBot, fake_slack: FakeSlack, ops_api: OpsAPI
):
    raw = body(pagerduty())
    status, receipt = await deliver(bot, "pagerduty", raw, pd_headers(raw))
    assert (status, receipt["started"]) == (200, 1)

    [root] = thread_roots(fake_slack)
    assert root["text"].startswith("PagerDuty incident #2: api is returning 502s (high urgency)")
    card = await wait_card(fake_slack, root["ts"], pending=True)
    runs = await bot.app[RUNTIME_KEY].db.run(lambda s: s.exec(select(Run)).all())
    assert [(r.requester, r.query) for r in runs] == [
        ("oncall", "restart api: incident 2 api is returning 502s")
    ]
    # U0LEAD is in the on-call group that asked: four-eyes refuses their approval
    await bot.click(card, APPROVE_ACTION, user="U0LEAD")
    note = await fake_slack.wait_for(lambda: fake_slack.ephemeral, 15)
    assert "four-eyes" in note[0]["text"]
    assert ops_api.restarts == []

    resolved = body(pagerduty("incident.resolved", event_id="01DEN5B4X2"))
    assert (await deliver(bot, "pagerduty", resolved, pd_headers(resolved)))[1]["resolved"] == 1
    texts = [m["text"] for m in fake_slack.thread_messages(CHANNEL, root["ts"])]
    assert any(t.startswith("Resolved: PagerDuty incident #2") for t in texts)


async def test_forged_deliveries_get_401_store_nothing_and_are_logged_once(
    bot: SlackBot, fake_slack: FakeSlack, caplog: pytest.LogCaptureFixture
):
    raw_pd = body(pagerduty())
    raw_am = body(alertmanager())
    now = int(time.time())
    hmac_raw = body({"id": "deploy-1", "service": "api"})
    forged = [
        ("alertmanager", raw_am, am_headers("not-the-token")),
        ("alertmanager", raw_am, {}),
        ("pagerduty", raw_pd, pd_headers(raw_pd, secret="not-the-secret")),
        ("pagerduty", raw_pd + b" ", pd_headers(raw_pd)),  # the body changed after signing
        ("deploys", hmac_raw, {TIMESTAMP_HEADER: str(now), SIGNATURE_HEADER: "v1=00"}),
    ]
    caplog.set_level(logging.INFO, logger="bot.triggers")
    for name, raw, headers in forged:
        caplog.clear()
        status, answer = await deliver(bot, name, raw, headers)
        assert status == 401, (name, answer)
        assert "wrong" in answer["error"] or "missing" in answer["error"]
        refusals = [r for r in caplog.records if "refused a delivery" in r.getMessage()]
        assert len(refusals) == 1
        for secret in (AM_TOKEN, PD_SECRET, HMAC_SECRET):
            assert secret not in caplog.text
    assert await stored(bot) == {"alerts": 0, "inbox": 0, "dedupe": 0, "runs": 0}
    assert thread_roots(fake_slack) == []


async def test_replayed_deliveries_start_nothing(bot: SlackBot, fake_slack: FakeSlack):
    raw_am, raw_pd = body(alertmanager()), body(pagerduty())
    await deliver(bot, "alertmanager", raw_am, am_headers())
    await deliver(bot, "pagerduty", raw_pd, pd_headers(raw_pd))
    signed_at = int(time.time())
    hmac_raw = body({"id": "deploy-7", "service": "api", "summary": "deploy 7 failed"})
    hmac_headers = {
        TIMESTAMP_HEADER: str(signed_at),
        SIGNATURE_HEADER: sign_hmac(HMAC_SECRET, signed_at, hmac_raw),
    }
    assert (await deliver(bot, "deploys", hmac_raw, hmac_headers))[1]["started"] == 1
    await settle(bot)
    before = await stored(bot)
    assert len(thread_roots(fake_slack)) == 3

    # the same bytes again, exactly as an attacker who saw them would send them
    for name, raw, headers in [
        ("alertmanager", raw_am, am_headers()),
        ("pagerduty", raw_pd, pd_headers(raw_pd)),
        ("deploys", hmac_raw, hmac_headers),
    ]:
        status, receipt = await deliver(bot, name, raw, headers)
        assert (status, receipt["started"], receipt["duplicates"]) == (200, 0, 1), name
    # an old signed delivery is outside the replay window even with a new id
    old = signed_at - 3600
    stale = body({"id": "deploy-8", "service": "api"})
    headers = {TIMESTAMP_HEADER: str(old), SIGNATURE_HEADER: sign_hmac(HMAC_SECRET, old, stale)}
    status, answer = await deliver(bot, "deploys", stale, headers)
    assert status == 401 and "replay window" in answer["error"]
    await settle(bot)
    assert await stored(bot) == before
    assert len(thread_roots(fake_slack)) == 3


async def test_duplicate_deliveries_at_once_start_one_run(bot: SlackBot, fake_slack: FakeSlack):
    raw = body(alertmanager())
    answers = await asyncio.gather(
        *(deliver(bot, "alertmanager", raw, am_headers()) for _ in range(4))
    )
    assert sorted(a[1]["started"] for a in answers) == [0, 0, 0, 1]
    await settle(bot)
    [root] = thread_roots(fake_slack)
    await wait_card(fake_slack, root["ts"], pending=True)
    counts = await stored(bot)
    assert (counts["alerts"], counts["runs"]) == (1, 1)


async def test_two_processes_receiving_the_same_alert_start_one_run(
    bot: SlackBot, database_url, aiohttp_client, tmp_path, monkeypatch, ops_api: OpsAPI,
    fake_slack: FakeSlack, fake_openai: FakeOpenAI,
):  # fmt: skip
    """Alertmanager in HA sends each notification from every replica: two bot processes on one
    database get the same alert at once, and the database's claim lets one of them open it."""
    other = await start_bot(
        database_url, aiohttp_client, tmp_path, monkeypatch, ops_api, fake_slack, fake_openai
    )
    raw = body(alertmanager())
    answers = await asyncio.gather(
        *(deliver(app, "alertmanager", raw, am_headers()) for app in (bot, other, bot, other))
    )
    assert sorted(a[1]["started"] for a in answers) == [0, 0, 0, 1]
    [root] = thread_roots(fake_slack)
    await wait_card(fake_slack, root["ts"], pending=True)
    await settle(bot)
    await settle(other)
    counts = await stored(bot)
    assert (counts["alerts"], counts["runs"]) == (1, 1)


async def test_malformed_payloads_and_unknown_triggers_get_4xx_with_a_reason(
    bot: SlackBot, fake_slack: FakeSlack
):
    not_v4 = {**alertmanager(), "version": "3"}
    no_fingerprint = alertmanager()
    del no_fingerprint["alerts"][0]["fingerprint"]
    cases = [
        ("alertmanager", b"{not json", "not JSON"),
        ("alertmanager", body(not_v4), 'version "4"'),
        ("alertmanager", body(no_fingerprint), "fingerprint"),
        ("alertmanager", b"[1, 2]", "not a JSON object"),
    ]
    for name, raw, reason in cases:
        status, answer = await deliver(bot, name, raw, am_headers())
        assert status == 400 and reason in answer["error"], (name, answer)
    pd_bad = body({"event": {"event_type": "incident.triggered", "data": {}}})
    status, answer = await deliver(bot, "pagerduty", pd_bad, pd_headers(pd_bad))
    assert status == 400 and "incident" in answer["error"]
    status, answer = await deliver(bot, "nosuch", body(alertmanager()), am_headers())
    assert status == 404 and "no trigger named 'nosuch'" in answer["error"]
    assert await stored(bot) == {"alerts": 0, "inbox": 0, "dedupe": 0, "runs": 0}
    assert thread_roots(fake_slack) == []
