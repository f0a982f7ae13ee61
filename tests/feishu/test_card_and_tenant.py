"""A Feishu click decides only on its own card, in its own tenant, for this app; an operator
from another tenant never approves unless the manifest names them. Through the real app with
encrypted, signed callbacks."""

from __future__ import annotations

import pytest

from bot.server import create_app
from tests.fakes.feishu_api import FakeFeishu
from tests.fakes.openai_server import FakeOpenAI, tool_call
from tests.fakes.ops_api import OpsAPI, ops_manifest
from tests.feishu.e2e import DEV, LEAD, bot_settings
from tests.feishu.test_e2e import FeishuBot, wait_card

EXTERNAL = "ou_external"


async def make_bot(database_url, aiohttp_client, tmp_path, ops_api, fake_feishu, fake_openai,
                   approvers: tuple[str, ...]) -> FeishuBot:  # fmt: skip
    (tmp_path / "manifests").mkdir(exist_ok=True)
    (tmp_path / "manifests" / "ops.yaml").write_text(ops_manifest(ops_api.url, approvers=approvers))
    settings = bot_settings(database_url=database_url, manifests=tmp_path / "manifests",
                            fake=fake_feishu, llm_url=fake_openai.base_url)  # fmt: skip
    return FeishuBot(await aiohttp_client(create_app(settings)), fake_feishu)


@pytest.fixture
async def bot(database_url, aiohttp_client, tmp_path, ops_api, fake_feishu, fake_openai):
    return await make_bot(database_url, aiohttp_client, tmp_path, ops_api, fake_feishu,
                          fake_openai, ())  # fmt: skip


async def two_cards(bot: FeishuBot, fake_openai: FakeOpenAI):
    fake_openai.script(tool_call("ops__restart", {"name": "api"}),
                       tool_call("ops__restart", {"name": "web"}))  # fmt: skip
    cards = []
    for service in ("api", "web"):
        event = bot.fake.message_event(f"restart {service}", user=DEV)
        await bot.send(event)
        cards.append(await wait_card(bot.fake, event["event"]["message"]["message_id"],
                                     pending=True))  # fmt: skip
    return cards


async def test_a_click_naming_another_cards_approval_is_refused(
    bot: FeishuBot, fake_feishu: FakeFeishu, fake_openai: FakeOpenAI, ops_api: OpsAPI
) -> None:
    """Card B's button with card A's approval id (a forged value): refused, A still pending."""
    card_a, card_b = await two_cards(bot, fake_openai)
    a_id = card_a.content["body"]["elements"][-1]["elements"][1]["columns"][0]["elements"][0][
        "behaviors"][0]["value"]["approval_id"]  # fmt: skip
    forged = fake_feishu.card_action(card_b.message_id, "approve", user=LEAD, approval_id=a_id)
    status, body = await bot.send(forged)
    assert status == 200 and body["toast"]["type"] == "error"
    assert "not on this approval's card" in body["toast"]["content"]
    assert ops_api.restarts == []


async def test_a_click_delivered_for_another_tenant_is_refused(
    bot: FeishuBot, fake_feishu: FakeFeishu, fake_openai: FakeOpenAI, ops_api: OpsAPI
) -> None:
    card_a, _ = await two_cards(bot, fake_openai)
    click = fake_feishu.card_action(card_a.message_id, "approve", user=LEAD, tenant="tenant_evil")
    status, body = await bot.send(click)
    assert body["toast"]["type"] == "error" and ops_api.restarts == []


async def test_an_operator_from_another_tenant_never_approves_by_default(
    bot: FeishuBot, fake_feishu: FakeFeishu, fake_openai: FakeOpenAI, ops_api: OpsAPI
) -> None:
    card_a, _ = await two_cards(bot, fake_openai)
    for decision in ("approve", "reject"):
        click = fake_feishu.card_action(card_a.message_id, decision, user=EXTERNAL,
                                        operator_tenant="tenant_partner")  # fmt: skip
        status, body = await bot.send(click)
        assert body["toast"]["type"] == "error"
        assert "not a member of this workspace" in body["toast"]["content"]
    assert ops_api.restarts == []


async def test_an_event_for_another_app_is_ignored(
    bot: FeishuBot, fake_feishu: FakeFeishu, fake_openai: FakeOpenAI
) -> None:
    event = fake_feishu.message_event("restart api", user=DEV)
    event["header"]["app_id"] = "cli_another_app"
    status, _ = await bot.send(event)
    assert status == 200 and fake_openai.requests == []
    assert fake_feishu.calls("message.reply") == []


async def test_a_named_external_approver_may_approve(
    database_url, aiohttp_client, tmp_path, ops_api: OpsAPI, fake_feishu: FakeFeishu,
    fake_openai: FakeOpenAI,
) -> None:  # fmt: skip
    bot = await make_bot(database_url, aiohttp_client, tmp_path, ops_api, fake_feishu,
                         fake_openai, (EXTERNAL,))  # fmt: skip
    fake_openai.script(tool_call("ops__restart", {"name": "api"}))
    event = fake_feishu.message_event("restart api", user=DEV)
    await bot.send(event)
    card = await wait_card(fake_feishu, event["event"]["message"]["message_id"], pending=True)
    click = fake_feishu.card_action(card.message_id, "approve", user=EXTERNAL,
                                    operator_tenant="tenant_partner")  # fmt: skip
    status, body = await bot.send(click)
    assert body["toast"]["type"] == "success"
    await bot.wait_idle()
    assert ops_api.restarts == ["api"]
