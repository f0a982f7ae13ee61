"""Audit in Feishu chat: `audit 7d [connector]` addressed to the bot (a report card without the
model) and the agent's `audit__report` tool; both for CHATOPS_AUDIT_VIEWERS only."""

from __future__ import annotations

import json

import pytest

from bot.server import RUNTIME_KEY, create_app
from tests.audit.conftest import seed
from tests.fakes.feishu_api import FakeFeishu
from tests.fakes.openai_server import FakeOpenAI, Turn, answer, tool_call
from tests.feishu.e2e import LEAD, bot_settings, markdown_of, title


@pytest.fixture
async def url(database_url, tmp_path, aiohttp_client, fake_feishu, fake_openai):
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    settings = bot_settings(
        database_url=database_url,
        manifests=manifests,
        fake=fake_feishu,
        llm_url=fake_openai.base_url,
        chatops_audit_viewers="ou_lead,ou_auditor",
        chatops_audit_all_channels_viewers="ou_lead",  # the seeded calls are in other chats
    )
    client = await aiohttp_client(create_app(settings))
    yield str(client.make_url("/feishu/events"))
    await client.app[RUNTIME_KEY].run_manager.wait_idle(15)  # no run left mid-write


@pytest.fixture
async def seeded(url: str, database_url: str, aiohttp_client) -> None:
    """The audit tests' call log (a week to 2026-11-20 12:00 UTC) in the running bot's DB."""
    import asyncio

    from bot.storage.database import create_db_engine

    engine = create_db_engine(database_url)
    try:
        await asyncio.to_thread(seed, engine)
    finally:
        engine.dispose()


async def test_viewer_gets_a_report_card_in_the_thread_without_the_model(
    url: str, fake_feishu: FakeFeishu, fake_openai: FakeOpenAI
):
    event = fake_feishu.message_event("audit 7d ops share", user=LEAD)
    root = event["event"]["message"]["message_id"]
    status, _ = await fake_feishu.push(url, event)
    assert status == 200
    [card] = await fake_feishu.wait_for(lambda f: f.cards_in(root), 10)
    assert title(card) == "Audit report"
    assert "Totals" in markdown_of(card) and "ops" in json.dumps(card)
    assert fake_openai.requests == []


async def test_non_viewer_is_told_privately(
    url: str, fake_feishu: FakeFeishu, fake_openai: FakeOpenAI
):
    event = fake_feishu.message_event("audit 7d", user="ou_dev")
    root = event["event"]["message"]["message_id"]
    await fake_feishu.push(url, event)
    [note] = await fake_feishu.wait_for(lambda f: f.ephemeral_to("ou_dev"), 10)
    assert note.chat_id == "oc_group"  # a card only ou_dev sees, in the chat they asked in
    assert "not allowed to see audit reports" in json.dumps(note.card)
    assert fake_feishu.calls("message.create") == []
    assert fake_feishu.replies_to(root) == [] and fake_openai.requests == []


async def test_text_starting_with_a_duration_goes_to_the_agent(
    url: str, fake_feishu: FakeFeishu, fake_openai: FakeOpenAI
):
    fake_openai.respond_with(lambda body: answer("Noted."))
    event = fake_feishu.message_event("2h later restart the api", user=LEAD)
    root = event["event"]["message"]["message_id"]
    await fake_feishu.push(url, event)
    await fake_feishu.wait_for(lambda f: len(f.cards_in(root)) >= 2, 10)
    assert fake_openai.requests and fake_feishu.calls("message.create") == []


def audit_then_answer(body: dict) -> Turn:
    """The model asks the built-in audit tool about restarts in the seeded week, then answers."""
    if body.get("stream"):
        return answer("Here is who approved restarts.")
    if body["messages"][-1]["role"] == "tool":
        return answer("Reported.")
    window = {"since": "2026-11-13T12:00Z", "until": "2026-11-20T12:00Z", "action": "restart"}
    return tool_call("audit__report", window, id="call_audit")


def tool_observations(fake: FakeOpenAI) -> list[str]:
    return [
        str(m["content"]) for body in fake.requests for m in body["messages"] if m["role"] == "tool"
    ]


@pytest.mark.parametrize(
    ("user", "sees_report"), [(LEAD, True), ("ou_dev", False)], ids=["viewer", "non-viewer"]
)
async def test_agent_answers_from_the_audit_tool_for_viewers_only(
    url: str,
    seeded: None,
    fake_feishu: FakeFeishu,
    fake_openai: FakeOpenAI,
    user: str,
    sees_report: bool,
):
    """ "@bot who approved restarts last week?" on Feishu: the agent calls `audit__report`."""
    fake_openai.respond_with(audit_then_answer)
    event = fake_feishu.message_event("who approved restarts last week?", user=user)
    root = event["event"]["message"]["message_id"]
    status, _ = await fake_feishu.push(url, event)
    assert status == 200
    answer_card = await fake_feishu.wait_for(
        lambda f: next(
            (c for c in f.cards_in(root) if "Here is who approved" in markdown_of(c)), None
        ),
        15,
    )
    assert answer_card is not None
    [observation] = tool_observations(fake_openai)
    if sees_report:
        assert "## Mutating calls (5)" in observation
        assert "approved by U_DAVE" in observation and "approved by U_CAROL" in observation
    else:
        assert "not allowed to see audit reports" in observation
        assert "U_DAVE" not in observation and "Mutating calls" not in observation
