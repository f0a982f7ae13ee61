"""Two Feishu apps in one process (issue 35, item 2): the FEISHU_* app for tenant A and an app
of CHATOPS_FEISHU_APPS_FILE for tenant B, each on its own FakeFeishu (its own tenant tokens).

Driven through `bot.server.create_app`: encrypted, signed pushes on each app's webhook route,
card callbacks, the real runtime and broker. Each app's threads are answered with its own
token; a push signed for one app and replayed on the other's route is refused; a click on A's
approval arriving through app B decides nothing. Every test runs on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from bot.server import RUNTIME_KEY, create_app
from bot.surfaces.feishu.mount import FEISHU_APPS_KEY
from tests.fakes.feishu_api import FakeFeishu
from tests.fakes.openai_server import FakeOpenAI, answer
from tests.fakes.serving import started
from tests.feishu.e2e import (
    DEV,
    LEAD,
    OpsAPI,
    approval_message,
    bot_settings,
    has_form,
    manifest,
    restart_then_answer,
    wait_card,
)

pytestmark = pytest.mark.both_databases

APPS_FILE = """\
apps:
  - name: beta
    app_id: {app_id}
    app_secret_env: BETA_FEISHU_SECRET
    verification_token_env: BETA_FEISHU_TOKEN
    encrypt_key_env: BETA_FEISHU_KEY
    tenant_keys: [{tenant}]
    domain: {domain}
"""


@pytest.fixture
async def fake_beta() -> AsyncIterator[FakeFeishu]:
    """The second app: its own id, secret, keys and tenant, on its own server."""
    fake = FakeFeishu(
        app_secret="beta-app-secret",
        verification_token="beta-verification-token",
        encrypt_key="beta-encrypt-key",
        tenant_key="tenant_beta",
        bot_open_id="ou_bot_beta",
    )
    async with started(fake) as running:
        yield running


@pytest.fixture
def settings(tmp_path, database_url, ops_api, fake_feishu, fake_beta, fake_openai, monkeypatch):
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    (manifests / "ops.yaml").write_text(manifest(ops_api.url))
    apps = tmp_path / "feishu-apps.yaml"
    apps.write_text(
        APPS_FILE.format(app_id=fake_beta.app_id, tenant=fake_beta.tenant_key, domain=fake_beta.url)
    )
    monkeypatch.setenv("BETA_FEISHU_SECRET", fake_beta.app_secret)
    monkeypatch.setenv("BETA_FEISHU_TOKEN", fake_beta.verification_token)
    monkeypatch.setenv("BETA_FEISHU_KEY", fake_beta.encrypt_key)
    return bot_settings(
        database_url=database_url,
        manifests=manifests,
        fake=fake_feishu,
        llm_url=fake_openai.base_url,
        chatops_feishu_apps_file=apps,
    )


class TwoApps:
    """The running app and a way to push as either Feishu app."""

    def __init__(self, client: Any, alpha: FakeFeishu, beta: FakeFeishu) -> None:
        self.client = client
        self.alpha, self.beta = alpha, beta
        self.alpha_url = str(client.make_url("/feishu/events"))
        self.beta_url = str(client.make_url("/feishu/events/beta"))

    async def push(self, fake: FakeFeishu, url: str, payload: dict[str, Any]) -> tuple[int, Any]:
        answer_ = await fake.push(url, payload)
        await self.client.app[FEISHU_APPS_KEY].wait_idle(10)
        return answer_

    async def runs_idle(self) -> None:
        await self.client.app[RUNTIME_KEY].run_manager.wait_idle(15)


@pytest.fixture
async def bot(aiohttp_client, settings, fake_feishu, fake_beta) -> TwoApps:
    return TwoApps(await aiohttp_client(create_app(settings)), fake_feishu, fake_beta)


def _tokens_used(fake: FakeFeishu) -> set[str]:
    return {
        call.headers.get("Authorization", "")[7:]
        for call in fake.requests
        if call.op not in ("token",)
    }


async def test_each_apps_threads_are_answered_through_its_own_client(
    bot: TwoApps, fake_feishu: FakeFeishu, fake_beta: FakeFeishu, fake_openai: FakeOpenAI
):
    fake_openai.respond_with(lambda request: answer("All quiet."))
    alpha_event = fake_feishu.message_event("status?", user=DEV)
    beta_event = fake_beta.message_event("status?", user="ou_beta_dev", chat_id="oc_beta")
    assert (await bot.push(fake_feishu, bot.alpha_url, alpha_event))[0] == 200
    assert (await bot.push(fake_beta, bot.beta_url, beta_event))[0] == 200
    await bot.runs_idle()

    alpha_root = alpha_event["event"]["message"]["message_id"]
    beta_root = beta_event["event"]["message"]["message_id"]
    for fake, root in ((fake_feishu, alpha_root), (fake_beta, beta_root)):
        replies = await fake.wait_for(lambda f, root=root: len(f.replies_to(root)) >= 2 or None)
        assert replies is True
        assert "All quiet." in json.dumps([m.content for m in fake.replies_to(root)])
    # nothing of one app's thread went to the other's Open API
    assert fake_beta.replies_to(alpha_root) == [] and fake_feishu.replies_to(beta_root) == []
    assert all(call.path.find(alpha_root) < 0 for call in fake_beta.requests)
    assert all(call.path.find(beta_root) < 0 for call in fake_feishu.requests)
    # every call carried a token the app's own Feishu issued, and none was refused
    assert _tokens_used(fake_feishu) <= fake_feishu.tokens
    assert _tokens_used(fake_beta) <= fake_beta.tokens
    assert not fake_feishu.tokens & fake_beta.tokens
    assert all(call.code in (None, 0) for call in fake_feishu.requests + fake_beta.requests)


async def test_a_push_signed_for_one_app_is_refused_on_the_others_route(
    bot: TwoApps, fake_feishu: FakeFeishu, fake_beta: FakeFeishu, fake_openai: FakeOpenAI
):
    fake_openai.respond_with(lambda request: answer("never"))
    event = fake_feishu.message_event("restart api", user=DEV)
    status, _ = await bot.push(fake_feishu, bot.beta_url, event)  # alpha's push, beta's route
    assert status == 401
    # signed with beta's key and token but naming alpha's app: not acted on
    forged = fake_feishu.message_event("restart api", user=DEV)
    forged["header"]["token"] = fake_beta.verification_token
    status, _ = await bot.push(fake_beta, bot.beta_url, forged)
    assert status == 200
    # beta's own app id, but a tenant beta does not serve
    beta_for_alpha = fake_beta.message_event("restart api", user=DEV)
    beta_for_alpha["header"]["tenant_key"] = fake_feishu.tenant_key
    status, _ = await bot.push(fake_beta, bot.beta_url, beta_for_alpha)
    assert status == 200
    await bot.runs_idle()
    assert fake_openai.requests == []
    assert fake_feishu.calls("message.reply") == [] and fake_beta.calls("message.reply") == []


async def test_a_click_on_alphas_approval_through_beta_decides_nothing(
    bot: TwoApps,
    fake_feishu: FakeFeishu,
    fake_beta: FakeFeishu,
    fake_openai: FakeOpenAI,
    ops_api: OpsAPI,
):
    fake_openai.respond_with(restart_then_answer)
    event = fake_feishu.message_event("restart api", user=DEV)
    root = event["event"]["message"]["message_id"]
    await bot.push(fake_feishu, bot.alpha_url, event)
    card = await wait_card(fake_feishu, root, pending=True)

    # the approver's click, as app beta delivers it: beta's id, token, tenant and key
    click = fake_feishu.card_action(card.message_id, "approve", user=LEAD)
    click["header"].update(
        app_id=fake_beta.app_id, token=fake_beta.verification_token, tenant_key="tenant_beta"
    )
    click["event"]["operator"]["tenant_key"] = "tenant_beta"
    status, body = await bot.push(fake_beta, bot.beta_url, click)
    assert status == 200
    assert body.get("toast", {}).get("type") == "error"
    # and beta's signature on a callback naming alpha's tenant
    click = fake_feishu.card_action(card.message_id, "approve", user=LEAD)
    click["header"].update(app_id=fake_beta.app_id, token=fake_beta.verification_token)
    status, body = await bot.push(fake_beta, bot.beta_url, click)
    assert status == 200 and body.get("toast", {}).get("type") == "error"

    pending = approval_message(fake_feishu, root)
    assert pending is not None and has_form(pending.content)  # still waiting
    assert ops_api.restarts == []
    assert fake_beta.calls("message.patch") == [] and fake_beta.calls("message.reply") == []

    status, body = await bot.push(
        fake_feishu, bot.alpha_url, fake_feishu.card_action(card.message_id, "approve", user=LEAD)
    )
    assert status == 200 and body["toast"]["type"] == "success"
    await bot.runs_idle()
    assert ops_api.restarts == ["api"]


async def test_pending_in_beta_never_lists_alphas_approval(
    bot: TwoApps, fake_feishu: FakeFeishu, fake_beta: FakeFeishu, fake_openai: FakeOpenAI
):
    """The approver's `pending` (their inbox) in a direct chat with each app: alpha's lists
    alpha's approval; beta's, for the same id, lists nothing (an id means nothing across
    tenants, and another tenant's card is never shown)."""
    fake_openai.respond_with(restart_then_answer)
    event = fake_feishu.message_event("restart api", user=DEV)
    root = event["event"]["message"]["message_id"]
    await bot.push(fake_feishu, bot.alpha_url, event)
    await wait_card(fake_feishu, root, pending=True)

    async def inbox(fake: FakeFeishu, url: str) -> str:
        dm = fake.message_event("pending", user=LEAD, chat_id=f"oc_p2p_{fake.tenant_key}",
                                chat_type="p2p", mention_bot=False)  # fmt: skip
        await bot.push(fake, url, dm)

        def answered(f: FakeFeishu) -> Any:
            return [m for m in f.messages.values()
                    if m.receive_id == LEAD and m.msg_type == "interactive"]  # fmt: skip

        [card] = await fake.wait_for(answered, 15)
        return json.dumps(card.content, ensure_ascii=False)

    in_alpha = await inbox(fake_feishu, bot.alpha_url)
    assert "ops.restart" in in_alpha and "Nothing is waiting" not in in_alpha
    in_beta = await inbox(fake_beta, bot.beta_url)
    assert "Nothing is waiting for you." in in_beta and "ops.restart" not in in_beta


async def test_an_app_whose_secret_is_refused_is_down_alone(
    aiohttp_client, settings, fake_feishu: FakeFeishu, fake_openai: FakeOpenAI, monkeypatch
):
    """Beta's secret is wrong: beta's route answers 503 (Feishu pushes again later) and
    /readyz names beta's variable, never the secret; alpha keeps answering."""
    monkeypatch.setenv("BETA_FEISHU_SECRET", "wrong-beta-secret-9f8e7d")
    client = await aiohttp_client(create_app(settings))
    health = client.app[RUNTIME_KEY].health
    await asyncio.wait_for(
        health.wait_until(lambda h: h.refused("feishu/beta") and h.state("feishu").ok), 15
    )
    reason = health.refused("feishu/beta") or ""
    assert "BETA_FEISHU_SECRET" in reason and "wrong-beta-secret" not in reason
    response = await client.post("/feishu/events/beta", json={"encrypt": "x"})
    assert response.status == 503
    fake_openai.respond_with(lambda request: answer("Alpha is fine."))
    event = fake_feishu.message_event("status?", user=DEV)
    status, _ = await fake_feishu.push(str(client.make_url("/feishu/events")), event)
    assert status == 200
    await client.app[FEISHU_APPS_KEY].wait_idle(10)
    await client.app[RUNTIME_KEY].run_manager.wait_idle(15)
    root = event["event"]["message"]["message_id"]
    assert "Alpha is fine." in json.dumps([m.content for m in fake_feishu.replies_to(root)])


async def test_a_route_naming_no_app_is_404(bot: TwoApps, fake_beta: FakeFeishu):
    event = fake_beta.message_event("hello")
    status, _ = await fake_beta.push(str(bot.client.make_url("/feishu/events/gamma")), event)
    assert status == 404


ALPHA_CALL, BETA_CALL = "restarted-in-alpha", "restarted-in-beta"


def seed_calls(database_url: str, tenants: dict[str, str]) -> None:
    """A mutating call of the last hour in each tenant (tenant key -> the call's argument)."""
    from datetime import timedelta

    from sqlmodel import Session

    from bot.clock import utcnow
    from bot.storage.database import open_database
    from bot.storage.models import CallLog

    engine = open_database(database_url)
    with Session(engine) as session:
        for tenant, name in tenants.items():
            session.add(
                CallLog(
                    at=utcnow() - timedelta(minutes=10),
                    platform="feishu",
                    workspace=tenant,
                    channel=f"oc_{name}",
                    requester="ou_dev",
                    requesters=["ou_dev"],
                    connector="ops",
                    action="restart",
                    tool_name="ops__restart",
                    mutating=True,
                    arguments={"name": name},
                    result_status="ok",
                )  # fmt: skip
            )
        session.commit()
    engine.dispose()


async def test_an_audit_in_one_apps_tenant_covers_that_tenant_with_its_viewers(
    aiohttp_client, settings, database_url, tmp_path, fake_feishu: FakeFeishu,
    fake_beta: FakeFeishu, fake_openai: FakeOpenAI,
):  # fmt: skip
    """`audit 1h` to each app: the report covers the tenant it was asked in, for that
    tenant's `audit_viewers` (CHATOPS_WORKSPACES_FILE) alone."""
    policy = tmp_path / "workspaces.yaml"
    policy.write_text(
        "workspaces:\n"
        f"  - {{platform: feishu, workspace: {fake_feishu.tenant_key}, audit_viewers: [{LEAD}]}}\n"
        f"  - {{platform: feishu, workspace: {fake_beta.tenant_key}, audit_viewers: [ou_beta]}}\n"
    )
    viewing = settings.model_copy(update={"chatops_workspaces_file": policy})
    bot = TwoApps(await aiohttp_client(create_app(viewing)), fake_feishu, fake_beta)
    seed_calls(database_url, {fake_feishu.tenant_key: ALPHA_CALL, fake_beta.tenant_key: BETA_CALL})

    async def audit(fake: FakeFeishu, url: str, user: str) -> str:
        before = len(fake.requests)
        assert (await bot.push(fake, url, fake.message_event("audit 1h", user=user)))[0] == 200
        sent = [c for c in fake.requests[before:] if c.op.split(".")[0] in ("message", "ephemeral")]
        assert sent, "the command was answered"
        return json.dumps([c.body for c in sent])

    in_alpha = await audit(fake_feishu, bot.alpha_url, LEAD)
    assert ALPHA_CALL in in_alpha and BETA_CALL not in in_alpha
    in_beta = await audit(fake_beta, bot.beta_url, "ou_beta")
    assert BETA_CALL in in_beta and ALPHA_CALL not in in_beta
    # alpha's viewer asking beta's app is nobody there (beta's entry names ou_beta alone)
    refused = await audit(fake_beta, bot.beta_url, LEAD)
    assert "not allowed to see audit reports" in refused
    assert ALPHA_CALL not in refused and BETA_CALL not in refused
    assert fake_openai.requests == []  # answered without the model
