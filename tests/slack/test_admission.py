"""Admission through Slack (`CHATOPS_MAX_WORKING_RUNS`): past the limit a thread's status
message says at once that it queues and where, runs start first come first served, a run
waiting for an approval lends its seat, and a queued run can be stopped before it starts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlmodel import Session, create_engine, select

from bot.storage.models import Run
from bot.surfaces.slack.cards import APPROVE_ACTION
from bot.surfaces.slack.render import STOP_ACTION
from tests.fakes.openai_server import FakeOpenAI, Turn, answer, tool_call
from tests.fakes.ops_api import OpsAPI
from tests.fakes.slack_api import FakeSlack
from tests.server.test_metrics import Scrape
from tests.slack.e2e import SlackBot, ops_bot, wait_card
from tests.slack.payloads import CHANNEL, mention


@pytest.fixture
async def bot(
    database_url, aiohttp_client, tmp_path: Path, ops_api: OpsAPI, fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
) -> SlackBot:  # fmt: skip
    """One seat: a second run queues behind the first."""
    return await ops_bot(aiohttp_client, database_url, tmp_path, ops_api.url, fake_slack,
                         fake_openai.base_url, approvers=("U0LEAD",),
                         chatops_max_working_runs=1)  # fmt: skip


def asked(body: dict[str, Any]) -> str:
    """The request of the run a model call belongs to: its first user message (the answer's
    synthesis quotes it after "Question:")."""
    said = next(str(m["content"]) for m in body["messages"] if m["role"] == "user")
    return said.removeprefix("Question:\n").split("\n")[0]


def model(body: dict[str, Any]) -> Turn:
    """Restart api when asked to (it needs approval); anything else is answered at once."""
    if body.get("stream"):
        return answer(f"Answered: {asked(body)}")
    restarting = "restart" in asked(body)
    if restarting and not any(m["role"] == "tool" for m in body["messages"]):
        return tool_call("ops__restart", {"name": "api"})
    return answer("done")


def status(fake: FakeSlack, root: str) -> str:
    """The thread's status message as it reads now ("" before it is posted)."""
    said = fake.thread_messages(CHANNEL, root)
    return said[0]["text"] if said else ""


def said(fake: FakeSlack, root: str) -> list[str]:
    return [m["text"] for m in fake.thread_messages(CHANNEL, root)]


def runs(database_url: str) -> list[Run]:
    with Session(create_engine(database_url)) as session:
        return list(session.exec(select(Run).order_by(Run.started_at)).all())


async def test_past_the_limit_runs_queue_in_order_and_say_their_place(
    bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, database_url: str
) -> None:
    fake_openai.respond_with(model)
    fake_openai.hold()  # the first run's first model call waits here
    first, second, third = (mention(f"question {n}") for n in (1, 2, 3))
    try:
        assert await bot.send(first) == 200
        await fake_openai.wait_for_requests(1)
        assert await bot.send(second) == 200
        assert await bot.send(third) == 200
        roots = [e["event"]["ts"] for e in (first, second, third)]
        await fake_slack.wait_for(lambda: len(fake_slack.thread_messages(CHANNEL, roots[2])), 15)
        assert "Queued: next in line" in status(fake_slack, roots[1])
        assert "Queued: 1 ahead of you" in status(fake_slack, roots[2])
        assert len(fake_openai.requests) == 1  # the queued runs call nothing meanwhile
        scrape = Scrape(await (await bot.client.get("/metrics")).text())
        assert scrape.value("chatops_runs_queued") == 2
        assert scrape.value("chatops_active_runs") == 3
    finally:
        fake_openai.release()
    await bot.wait_idle()
    assert [r.status for r in runs(database_url)] == ["done"] * 3
    # first come, first served: each run had its seat from its first call to its answer
    order = [asked(body) for body in fake_openai.requests]
    assert order == [f"question {n}" for n in (1, 1, 2, 2, 3, 3)]
    for n, root in enumerate(roots, 1):
        assert f"Answered: question {n}" in said(fake_slack, root)
        assert status(fake_slack, root).startswith(":white_check_mark: Done")


async def test_a_run_waiting_for_approval_lends_its_seat(
    bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, ops_api: OpsAPI,
    database_url: str,
) -> None:  # fmt: skip
    fake_openai.respond_with(model)
    restart = mention("restart api", user="U0DEV")
    assert await bot.send(restart) == 200
    card = await wait_card(fake_slack, restart["event"]["ts"], pending=True)
    question = mention("how is the weather", user="U0DEV")
    assert await bot.send(question) == 200
    answered = "Answered: how is the weather"
    question_root = question["event"]["ts"]
    await fake_slack.wait_for(lambda: answered in said(fake_slack, question_root), 15)
    assert ops_api.restarts == []  # the first run still waits for its approval
    assert await bot.click(card, APPROVE_ACTION, user="U0LEAD") == 200
    await bot.wait_idle()
    assert ops_api.restarts == ["api"]
    assert [r.status for r in runs(database_url)] == ["done", "done"]


async def test_a_queued_run_stopped_before_its_turn_never_starts(
    bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, database_url: str
) -> None:
    fake_openai.respond_with(model)
    fake_openai.hold()
    first, queued = mention("question 1"), mention("question 2", user="U0DEV")
    root = queued["event"]["ts"]
    try:
        assert await bot.send(first) == 200
        await fake_openai.wait_for_requests(1)
        assert await bot.send(queued) == 200
        await fake_slack.wait_for(lambda: "Queued" in status(fake_slack, root), 15)
        queued_status = fake_slack.thread_messages(CHANNEL, root)[0]
        assert await bot.click(queued_status, STOP_ACTION, user="U0DEV") == 200
        await fake_slack.wait_for(lambda: "Cancelled" in status(fake_slack, root), 15)
    finally:
        fake_openai.release()
    await bot.wait_idle()
    assert [(r.query, r.status) for r in runs(database_url)] == [
        ("question 1", "done"), ("question 2", "cancelled"),
    ]  # fmt: skip
    assert {asked(body) for body in fake_openai.requests} == {"question 1"}
