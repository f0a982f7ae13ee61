"""Card sizes measured as Feishu measures them: the request body, where the card is JSON inside
the `content` string (escaped twice). A fake that refuses a card request over 30 KB (230025)
accepts every answer and audit card, however quote- or backslash-heavy; a card Feishu refuses
anyway goes again in smaller cards."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from sqlmodel import Session, select

from bot.clock import utcnow
from bot.server import RUNTIME_KEY, create_app
from bot.storage.models import CallLog, Run
from tests.fakes.feishu_api import FakeFeishu
from tests.fakes.openai_server import FakeOpenAI, answering
from tests.feishu.e2e import DEV, LEAD, bot_settings, markdown_of
from tests.feishu.test_e2e import FeishuBot

# about 50,000 characters, a third of them quotes and backslashes (a JSON dump of Windows paths)
HEAVY = "\n".join(
    f'Line {i:03d}: {{"path": "C:\\\\Users\\\\svc\\\\logs\\\\{i}.log", "q": "\\"x\\""}}'
    + ' "\\\\"' * 40
    for i in range(200)
)


@pytest.fixture
async def bot(database_url, aiohttp_client, tmp_path, fake_feishu: FakeFeishu,
              fake_openai: FakeOpenAI) -> FeishuBot:  # fmt: skip
    (tmp_path / "manifests").mkdir()
    settings = bot_settings(database_url=database_url, manifests=tmp_path / "manifests",
                            fake=fake_feishu, llm_url=fake_openai.base_url,
                            chatops_audit_viewers=LEAD)  # fmt: skip
    return FeishuBot(await aiohttp_client(create_app(settings)), fake_feishu)


def lines_in(cards: list[dict[str, Any]]) -> list[str]:
    text = "\n".join(markdown_of(card) for card in cards)
    return [line.split(":")[0] for line in text.split("\n") if line.startswith("Line ")]


async def ask(bot: FeishuBot, fake: FakeFeishu) -> tuple[str, list[dict[str, Any]]]:
    event = fake.message_event("dump the log paths", user=DEV)
    root = event["event"]["message"]["message_id"]
    await bot.send(event)
    await bot.wait_idle()
    runtime = bot.client.app[RUNTIME_KEY]  # type: ignore[index]
    with Session(runtime.engine) as session:
        assert [r.status for r in session.exec(select(Run))] == ["done"]
    return root, fake.cards_in(root)[1:]  # after the status card


async def test_a_quote_and_backslash_heavy_answer_fits_in_30kb_requests(
    bot: FeishuBot, fake_feishu: FakeFeishu, fake_openai: FakeOpenAI
) -> None:
    fake_openai.respond_with(answering(HEAVY))
    _root, cards = await ask(bot, fake_feishu)
    assert lines_in(cards) == [f"Line {i:03d}" for i in range(200)]
    replies = fake_feishu.calls("message.reply")
    assert all(c.code == 0 for c in replies)
    assert max(c.size for c in replies) <= 30 * 1024


async def test_a_card_feishu_refuses_anyway_goes_again_in_smaller_cards(
    bot: FeishuBot, fake_feishu: FakeFeishu, fake_openai: FakeOpenAI
) -> None:
    def arm() -> None:
        fake_feishu.fail_next("message.reply", status=200, code=230025, msg="content too long")

    fake_openai.respond_with(answering(HEAVY, on_synthesis=arm))
    _root, cards = await ask(bot, fake_feishu)
    assert lines_in(cards) == [f"Line {i:03d}" for i in range(200)]


async def test_an_audit_card_of_heavy_calls_fits(bot: FeishuBot, fake_feishu: FakeFeishu) -> None:
    runtime = bot.client.app[RUNTIME_KEY]  # type: ignore[index]
    with Session(runtime.engine) as session:
        for i in range(300):
            session.add(CallLog(
                at=utcnow() - timedelta(minutes=i + 1), run_id=f"R{i}", tool_call_id=f"c{i}",
                platform="feishu", channel="oc_group", requester=DEV, connector="fs",
                action="write", tool_name="fs__write", mutating=True,
                arguments={"path": f'C:\\\\data\\\\"{i}"\\\\' * 6, "json": '{"a": "\\"b\\""}' * 4},
                approval_status="approved", approvers=[LEAD], result_status="ok",
            ))  # fmt: skip
        session.commit()
    event = fake_feishu.message_event("audit 7d fs share", user=LEAD)
    root = event["event"]["message"]["message_id"]
    await bot.send(event)
    [card] = await fake_feishu.wait_for(lambda f: f.cards_in(root), 10)
    [reply] = fake_feishu.calls("message.reply")
    assert reply.code == 0 and reply.size <= 30 * 1024
    assert "more mutating calls: `chatops audit --format csv` lists them all" in json.dumps(card)
