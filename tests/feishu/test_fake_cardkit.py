"""FakeFeishu's CardKit answers the real lark-oapi client the way the documentation says:
card JSON 2.0 only, never exclusive, sent once, a rising sequence per card, text streamed only
in streaming mode, and an app without the scope refused on every call."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from bot.surfaces.feishu.send import FeishuAPIError, FeishuSender
from tests.fakes.feishu_api import FakeFeishu
from tests.fakes.feishu_cardkit import MISSING_SCOPE, NOT_STREAMING, SEQUENCE_NOT_RISING


@pytest.fixture
async def sender(fake_feishu: FakeFeishu) -> AsyncIterator[FeishuSender]:
    sender = FeishuSender.for_app(fake_feishu.app_id, fake_feishu.app_secret, fake_feishu.url)
    yield sender
    sender.close()


def card(streaming: bool = True, **config: Any) -> dict[str, Any]:
    return {
        "schema": "2.0",
        "config": {"update_multi": True, "streaming_mode": streaming, **config},
        "body": {"elements": [{"tag": "markdown", "element_id": "answer", "content": ""}]},
    }


async def code_of(call: Any) -> int | None:
    try:
        await call
    except FeishuAPIError as exc:
        return exc.code
    return 0


async def test_a_card_entity_streams_then_is_replaced_whole(
    sender: FeishuSender, fake_feishu: FakeFeishu
) -> None:
    card_id = await sender.create_card(card())
    await sender.stream_text(card_id, "answer", "Hel", 1)
    await sender.stream_text(card_id, "answer", "Hello", 2)
    assert await code_of(sender.stream_text(card_id, "answer", "Hello!", 2)) == SEQUENCE_NOT_RISING
    assert await code_of(sender.stream_text(card_id, "missing", "x", 3)) == 99992402
    final = card(streaming=False)
    final["body"]["elements"][0]["content"] = "Hello, world"
    await sender.update_card(card_id, final, 3)
    entity = fake_feishu.cards[card_id]
    assert entity.streamed == ["Hel", "Hello"] and not entity.card["config"]["streaming_mode"]
    assert await code_of(sender.stream_text(card_id, "answer", "more", 4)) == NOT_STREAMING


async def test_only_json_2_cards_that_may_be_shared_become_entities(sender: FeishuSender) -> None:
    assert await code_of(sender.create_card({"config": {}, "elements": []})) == 99992402
    assert await code_of(sender.create_card(card(update_multi=False))) == 99992402
    big = card()
    big["body"]["elements"][0]["content"] = "x" * 31_000
    assert await code_of(sender.create_card(big)) == 99992402


async def test_an_entity_is_sent_once_and_its_message_shows_it(
    sender: FeishuSender, fake_feishu: FakeFeishu
) -> None:
    root = (await sender.send("chat_id", "oc_group", "text", {"text": "hi"}))[0]
    card_id = await sender.create_card(card())
    entity = {"type": "card", "data": {"card_id": card_id}}
    message_id = await sender.reply(root, "interactive", entity)
    await sender.stream_text(card_id, "answer", "Hi there", 1)
    assert fake_feishu.messages[message_id].content["body"]["elements"][0]["content"] == (
        "Hi there"
    )
    assert await code_of(sender.reply(root, "interactive", entity)) == 230001
    missing = {"type": "card", "data": {"card_id": "7000"}}
    assert await code_of(sender.reply(root, "interactive", missing)) == 230001


async def test_an_app_without_the_scope_is_refused_every_call(
    sender: FeishuSender, fake_feishu: FakeFeishu
) -> None:
    fake_feishu.turn_off_cardkit()
    assert await code_of(sender.create_card(card())) == MISSING_SCOPE
