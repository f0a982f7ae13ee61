"""Feishu's native agent experience end to end (encrypted, signed pushes and callbacks in,
FakeFeishu out): the answer streams into a CardKit card (created, sent by card_id, its markdown
element streamed with rising sequence numbers), then the card becomes the answer with feedback
buttons; a broken synthesis' fallback replaces the partial text in that card; an app without
CardKit posts once, remembered; the status card is a plan with a Stop button; Stop and the
thumbs are card callbacks from the verified operator."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from sqlmodel import Session, create_engine, select

from bot.server import create_app
from bot.storage.models import Run, RunFeedback
from tests.fakes.feishu_api import FakeFeishu
from tests.fakes.openai_server import FakeOpenAI, Turn, answer, broken_stream, held_stream
from tests.feishu.e2e import (
    DEV,
    LEAD,
    FeishuBot,
    OpsAPI,
    approval_message,
    bot_settings,
    manifest,
    markdown_of,
    restart_then_answer,
    status_message,
    title,
    wait_card,
)

ANSWER = "**api** is healthy. <at id=all></at> See [the runbook](https://runbooks.example/api)."
FALLBACK = "api looks healthy (the loop's own answer)"


@pytest.fixture
def make_bot(tmp_path, database_url, ops_api, fake_feishu, fake_openai, aiohttp_client):
    async def build(**extra: Any) -> FeishuBot:
        manifests = tmp_path / "manifests"
        manifests.mkdir(exist_ok=True)
        (manifests / "ops.yaml").write_text(manifest(ops_api.url))
        settings = bot_settings(
            database_url=database_url, manifests=manifests, fake=fake_feishu,
            llm_url=fake_openai.base_url, **extra,
        )  # fmt: skip
        return FeishuBot(await aiohttp_client(create_app(settings)), fake_feishu)

    return build


def synthesis(turn: Turn):
    return lambda body: turn if body.get("stream") else answer(FALLBACK)


def runs(database_url: str) -> list[Run]:
    with Session(create_engine(database_url)) as session:
        return list(session.exec(select(Run)).all())


def entity_messages(fake: FakeFeishu, root: str) -> list[Any]:
    return [m for m in fake.replies_to(root) if fake.card_of(m.message_id) is not None]


def buttons(card: dict[str, Any]) -> list[dict[str, Any]]:
    found, stack = [], [card]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if node.get("tag") == "button":
                found.append(node["behaviors"][0]["value"])
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return found


async def ask(bot: FeishuBot, fake: FakeFeishu, text: str = "is the api healthy?") -> str:
    event = fake.message_event(text, user=DEV)
    await bot.send(event)
    return event["event"]["message"]["message_id"]


async def test_the_answer_streams_into_a_card_then_becomes_the_answer_with_thumbs(
    make_bot, fake_feishu: FakeFeishu, fake_openai: FakeOpenAI, database_url: str
) -> None:
    bot = await make_bot()
    fake_openai.respond_with(synthesis(held_stream(ANSWER, after=2)))
    root = await ask(bot, fake_feishu)
    [live] = await fake_feishu.wait_for(lambda f: entity_messages(f, root), 15)
    card = fake_feishu.card_of(live.message_id)
    assert card is not None and card.card["config"]["streaming_mode"] is True
    assert markdown_of(live.content) == "**api** is healt"  # two chunks while the model writes
    fake_openai.release_stream()
    await bot.wait_idle()

    [message] = entity_messages(fake_feishu, root)
    final = message.content
    assert not final["config"].get("streaming_mode")
    assert "[the runbook](https://runbooks.example/api)" in markdown_of(final)
    assert "<at id=all>" not in json.dumps(final)  # defused while streaming and after
    assert all("<at id=all>" not in text for text in card.streamed)
    assert {"chatops": "feedback", "rating": "up"} in buttons(final)
    sequences = [c.body["sequence"] for c in fake_feishu.requests
                 if c.op in ("card.content", "card.update")]  # fmt: skip
    assert sequences == sorted(set(sequences)) and len(sequences) >= 1
    [run] = runs(database_url)
    assert run.answer_message_id == message.message_id

    for user, rating in ((DEV, "up"), (DEV, "down"), (LEAD, "up")):
        code, body = await bot.send(
            fake_feishu.control_action(message.message_id, "feedback", user=user, rating=rating)
        )
        assert code == 200 and body["toast"]["type"] == "success"
    with Session(create_engine(database_url)) as session:
        rows = session.exec(select(RunFeedback).order_by(RunFeedback.user_id)).all()
        assert [(r.user_id, r.rating) for r in rows] == [(DEV, "down"), (LEAD, "up")]


async def test_a_broken_synthesis_ends_as_the_fallback_in_the_same_card(
    make_bot, fake_feishu: FakeFeishu, fake_openai: FakeOpenAI
) -> None:
    bot = await make_bot()
    fake_openai.respond_with(synthesis(broken_stream("Partial text that must go away.", after=2)))
    root = await ask(bot, fake_feishu)
    await bot.wait_idle()
    [message] = entity_messages(fake_feishu, root)
    card = fake_feishu.card_of(message.message_id)
    assert card is not None and any("Partial " in v for v in map(json.dumps, card.versions))
    assert markdown_of(message.content).startswith(FALLBACK)
    assert "Partial" not in json.dumps(message.content)
    answers = [m for m in fake_feishu.replies_to(root) if FALLBACK in json.dumps(m.content)]
    assert answers == [message]  # one answer, where the partial text was


async def test_an_app_without_cardkit_posts_once_remembered_with_one_log_line(
    make_bot, fake_feishu: FakeFeishu, fake_openai: FakeOpenAI, caplog
) -> None:
    bot = await make_bot()
    fake_feishu.turn_off_cardkit()
    fake_openai.respond_with(synthesis(answer("All quiet.")))
    caplog.set_level(logging.WARNING, logger="bot.surfaces.feishu.stream")
    roots = [await ask(bot, fake_feishu, "how are things?") for _ in range(2)]
    await bot.wait_idle()
    for root in roots:
        await fake_feishu.wait_for(lambda f, r=root: len(f.replies_to(r)) == 2, 15)
    assert len(fake_feishu.calls("card.create")) == 1  # tried once for the tenant
    for root in roots:
        reply = fake_feishu.replies_to(root)[-1]
        assert markdown_of(reply.content).startswith("All quiet.")
        assert {"chatops": "feedback", "rating": "down"} in buttons(reply.content)
    lines = [r for r in caplog.records if "streaming answers is not available" in r.getMessage()]
    assert len(lines) == 1 and "99991672" in lines[0].getMessage()


@pytest.mark.parametrize("style", ["plan", "classic"])
async def test_stop_on_the_status_card_by_the_requester_only(
    make_bot, fake_feishu: FakeFeishu, fake_openai: FakeOpenAI, ops_api: OpsAPI,
    database_url: str, style: str,
) -> None:  # fmt: skip
    bot = await make_bot(chatops_status_style=style)
    fake_openai.respond_with(restart_then_answer)
    root, _ = await bot.request_restart()
    status = await fake_feishu.wait_for(
        lambda f: (s := status_message(f, root)) and title(s.content) == "Waiting for approval"
        and s, 15,
    )  # fmt: skip
    assert {"chatops": "stop"} in buttons(status.content)
    if style == "plan":
        text = markdown_of(status.content)
        assert "**Approval for ops__restart** \u2014 waiting for a decision" in text
        assert "name=api" in text  # the call's arguments, summarised
    code, body = await bot.send(fake_feishu.control_action(status.message_id, "stop", user="ou_x"))
    assert code == 200 and body["toast"]["type"] == "info"
    assert "Only the people" in body["toast"]["content"]
    assert [r.status for r in runs(database_url)] == ["waiting_approval"]
    code, body = await bot.send(fake_feishu.control_action(status.message_id, "stop", user=DEV))
    assert code == 200 and body["toast"]["type"] == "success"
    await bot.wait_idle()
    assert [(r.status, r.stopped_by) for r in runs(database_url)] == [("cancelled", DEV)]
    assert ops_api.restarts == []
    card = approval_message(fake_feishu, root)
    assert card is not None and title(card.content).startswith("Cancelled")
    final = status_message(fake_feishu, root).content
    assert title(final) == "Cancelled" and {"chatops": "stop"} not in buttons(final)
    notices = [m.content.get("text") for m in fake_feishu.replies_to(root) if m.msg_type == "text"]
    assert f'<at user_id="{DEV}"></at> stopped this run.' in notices


async def test_a_forged_stop_value_on_another_card_stops_nothing(
    make_bot, fake_feishu: FakeFeishu, fake_openai: FakeOpenAI, database_url: str
) -> None:
    bot = await make_bot()
    fake_openai.respond_with(restart_then_answer)
    root, card = await bot.request_restart()
    await wait_card(fake_feishu, root, pending=True)
    forged = fake_feishu.control_action(
        status_message(fake_feishu, root).message_id, "stop", user=DEV
    )
    forged["event"]["context"]["open_message_id"] = card.message_id  # the approval card
    code, body = await bot.send(forged)
    assert code == 200 and body["toast"]["type"] == "info"
    assert [r.status for r in runs(database_url)] == ["waiting_approval"]
