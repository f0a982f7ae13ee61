"""`pending` to the bot in a Feishu direct message answers with the sender's inbox as a card
("Waiting for you"), through the real event callback (`/feishu/events`), checked by the fake
as Feishu parses card JSON 2.0: what this person may approve now, its age and expiry and a
link to its card's chat; the requester (four-eyes) and a decided approval are not listed, and
`pending` never reaches the model. SQLite and PostgreSQL.
"""

from __future__ import annotations

import json

import pytest

from bot.storage.models import Approval
from tests.approvals.test_routing import eventually
from tests.approvals.test_rules import restart
from tests.fakes.feishu_elements import elements_problem
from tests.fakes.feishu_events import FakeMessage
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.ops_api import OpsAPI
from tests.feishu.e2e import FeishuBot
from tests.feishu.e2e import wait_card as wait_feishu_card

pytestmark = pytest.mark.both_databases


async def ask_pending(bot: FeishuBot, user: str, seen: int) -> FakeMessage:
    """`user` sends `pending` in their direct chat with the bot; the card they get back (the
    `seen`+1-th card sent to them)."""
    fake = bot.fake
    chat = f"oc_p2p_{user}"
    await bot.send(
        fake.message_event("pending", user=user, chat_id=chat, chat_type="p2p", mention_bot=False)
    )

    def answered(f) -> FakeMessage | None:
        sent = [
            m for m in f.messages.values() if m.receive_id == user and m.msg_type == "interactive"
        ]
        return sent[seen] if len(sent) > seen else None

    return await fake.wait_for(answered, 15)


async def test_feishu_pending_lists_what_waits_for_the_sender(
    feishu_bot: FeishuBot, fake_openai: FakeOpenAI, ops_api: OpsAPI, db_rows
) -> None:
    fake = feishu_bot.fake
    fake_openai.script(*restart("api", "dev"))
    event = fake.message_event("restart api on dev", user="ou_dev")
    root = event["event"]["message"]["message_id"]
    await feishu_bot.send(event)
    card = await wait_feishu_card(fake, root, pending=True)
    # the bot posts the card, then records where it is: the list links it from then on
    await eventually(lambda: any(a.card_message_id for a in db_rows(Approval)))
    models_asked = len(fake_openai.requests)

    listed = await ask_pending(feishu_bot, "ou_lead", 0)
    content = listed.content
    assert content["header"]["title"]["content"] == "Waiting for you"
    assert elements_problem(listed.contents[-1]) is None
    shown = json.dumps(content, ensure_ascii=False)
    assert "ops.restart" in shown and "asked " in shown and "expires in " in shown
    assert "openChatId=" in shown  # the way to the card's buttons
    assert len(fake_openai.requests) == models_asked  # answered without the model

    nothing = await ask_pending(feishu_bot, "ou_dev", 0)  # the requester: four-eyes
    assert "Nothing is waiting for you." in json.dumps(nothing.content, ensure_ascii=False)

    await feishu_bot.click(card, "approve", user="ou_lead")
    await feishu_bot.wait_idle()
    assert ops_api.restarts == ["api"]
    after = await ask_pending(feishu_bot, "ou_lead", 1)
    assert "Nothing is waiting for you." in json.dumps(after.content, ensure_ascii=False)
