"""Issue 26 items 5, 7 and 8 through real `chatops serve` processes, signed as Slack signs.

Two processes share a PostgreSQL database and what a test sends "to the other process" crosses
to it (a mention counted there, a reply delivered as mail, a click recorded there). PostgreSQL
only: one SQLite process taking both parts proved a subset of it (the caps on SQLite are in
tests/slack/test_personal_limits.py). Per-person caps: a person's third mention is refused in its
thread while another person's runs; a call past the pending-approvals cap gets no card and is
logged as blocked. Stop: a replier may stop the run only once the agent has read the reply; an
outsider never. The last iteration: a reply read with the final answer keeps that answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bot.storage.models import Approval, CallLog, Message, Run, RunMail
from bot.surfaces.slack.cards import APPROVE_ACTION
from bot.surfaces.slack.render import STOP_ACTION
from tests.databases import rows
from tests.fakes.openai_server import FakeOpenAI, Turn, answer, tool_call
from tests.fakes.ops_api import OpsAPI, restart_then_answer
from tests.fakes.slack_api import FakeSlack
from tests.server.serve_process import ServeProcess, SlackSender
from tests.server.test_processes import answered, root_of, runs_ended, two_processes
from tests.slack.e2e import card_in, texts, wait_card
from tests.slack.payloads import CHANNEL, mention, message

pytestmark = pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)

Bots = tuple[ServeProcess, ServeProcess, SlackSender]
Start = Callable[..., AbstractAsyncContextManager[Bots]]

REFUSED_STOP = "Only the people who asked"


@pytest.fixture
def start(
    tmp_path: Path, database_url: str, ops_api: OpsAPI, fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
) -> Start:  # fmt: skip
    """`start(**settings)`: the two processes on PostgreSQL and a sender of signed Slack
    requests."""

    @asynccontextmanager
    async def started(**extra: str) -> AsyncIterator[Bots]:
        async with (
            aiohttp.ClientSession() as http,
            two_processes(tmp_path, database_url, ops_api, fake_slack, fake_openai, **extra) as (
                a,
                b,
            ),
        ):
            yield a, b, SlackSender(http)

    return started


async def reply_reached_the_run(database_url: str, text: str) -> None:
    """The reply is in the run's interrupts: the owner stores it after queueing it, and a reply
    that reached the other process is mail until the owner took it."""
    for _ in range(150):
        stored = [m for m in rows(database_url, Message) if text in m.text]
        mail = [m for m in rows(database_url, RunMail) if text in m.text]
        if stored and all(m.taken_by for m in mail):
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"the reply {text!r} never reached the run")


def runs_of(database_url: str, user: str) -> list[Run]:
    return [r for r in rows(database_url, Run) if r.requester == user]


# --- item 5: per-person caps -------------------------------------------------------------------


async def test_one_persons_runs_and_approvals_are_capped_across_processes(
    start: Start, database_url: str, fake_slack: FakeSlack, fake_openai: FakeOpenAI,
    ops_api: OpsAPI,
) -> None:  # fmt: skip
    """U0A's first run waits at its card and the second in a model call: U0A's third mention,
    sent to the other process, is refused in its thread naming the limit. The second run's
    call would be U0A's second pending approval: no card, logged as blocked, the thread told.
    U0B's mention, on the other process, gets its card and its answer."""
    fake_openai.respond_with(restart_then_answer)
    caps = {"chatops_max_active_runs_per_user": "2", "chatops_max_pending_approvals_per_user": "1"}
    async with start(**caps) as (a, b, slack):
        first, second, third = (mention("restart api", user="U0A") for _ in range(3))
        assert await slack.send(a, first) == 200
        await wait_card(fake_slack, root_of(first), pending=True)
        fake_openai.hold()  # the second run waits in its model call
        try:
            assert await slack.send(a, second) == 200
            await fake_openai.wait_for_requests(2, 30)
            assert await slack.send(b, third) == 200
            refusal = await fake_slack.wait_for(lambda: texts(fake_slack, root_of(third)), 30)
        finally:
            fake_openai.release()
        [notice] = refusal
        assert notice.startswith("<@U0A>") and "you already have 2 requests in progress" in notice
        await answered(fake_slack, root_of(second))  # its call blocked, the run went on
        said = " ".join(texts(fake_slack, root_of(second)))
        assert "was not sent for approval: 1 approval is already waiting" in said
        assert card_in(fake_slack, root_of(second)) is None
        other = mention("restart api", user="U0B")
        assert await slack.send(b, other) == 200
        card = await wait_card(fake_slack, root_of(other), pending=True)
        assert await slack.click(a, card, APPROVE_ACTION, user="U0LEAD") == 200
        await answered(fake_slack, root_of(other))
        await runs_ended(database_url, 2)
    assert sorted(r.status for r in runs_of(database_url, "U0A")) == ["done", "waiting_approval"]
    assert [r.status for r in runs_of(database_url, "U0B")] == ["done"]
    [blocked] = [r.id for r in runs_of(database_url, "U0A") if r.status == "done"]
    calls = {c.run_id: c.approval_status for c in rows(database_url, CallLog)}
    assert calls[blocked] == "blocked"
    assert sorted((x.requester, x.status) for x in rows(database_url, Approval)) == [
        ("U0A", "pending"), ("U0B", "approved"),
    ]  # fmt: skip
    assert ops_api.restarts == ["api"]  # U0B's only


# --- item 7: Stop belongs to the requesters the run has read -----------------------------------


async def refused_stop(
    slack: SlackSender, process: ServeProcess, fake: FakeSlack, status: dict[str, Any], user: str
) -> None:
    """`user` presses Stop on `process` and is told, privately, that it is not theirs."""
    before = [e for e in fake.ephemeral if e["user"] == user]
    assert await slack.click(process, status, STOP_ACTION, user=user) == 200
    note = await fake.wait_for(
        lambda: [e for e in fake.ephemeral if e["user"] == user][len(before) :], 15
    )
    assert REFUSED_STOP in note[0]["text"]


async def test_a_replier_may_stop_only_once_the_agent_has_read_the_reply(
    start: Start, database_url: str, fake_slack: FakeSlack, fake_openai: FakeOpenAI,
    ops_api: OpsAPI,
) -> None:  # fmt: skip
    """U0OPS replies (to the other process) while the run waits at its card: the reply is
    queued on the owner, not read, so U0OPS's Stop is refused (on either process) and the run
    goes on. Once the approved call ran and the model was handed the reply, U0OPS's Stop ends the
    run as cancelled. U0EVE, who never wrote, is refused on either process throughout."""
    fake_openai.respond_with(restart_then_answer)
    async with start() as (a, b, slack):
        event = mention("restart api", user="U0DEV")
        root = root_of(event)
        assert await slack.send(a, event) == 200
        card = await wait_card(fake_slack, root, pending=True)
        reply = message("also check the db", user="U0OPS", thread_ts=root)
        assert await slack.send(b, reply) == 200
        await reply_reached_the_run(database_url, "also check the db")
        status = fake_slack.thread_messages(CHANNEL, root)[0]
        for process in (a, b):
            for user in ("U0OPS", "U0EVE"):
                await refused_stop(slack, process, fake_slack, status, user)
        assert [(r.status, r.stopped_by) for r in rows(database_url, Run)] == [
            ("waiting_approval", None)
        ]
        fake_openai.hold()  # the model call that reads the reply waits here
        try:
            assert await slack.click(b, card, APPROVE_ACTION, user="U0LEAD") == 200
            await fake_openai.wait_for_requests(2, 30)
            read = fake_openai.requests[-1]["messages"][-1]["content"]
            assert read.startswith("[USER INTERRUPT]") and "also check the db" in read
            await refused_stop(slack, a, fake_slack, status, "U0EVE")
            assert await slack.click(a, status, STOP_ACTION, user="U0OPS") == 200
            await fake_slack.wait_for(
                lambda: any("stopped this run" in t for t in texts(fake_slack, root)), 30
            )
        finally:
            fake_openai.release()
        await runs_ended(database_url, 1)
    assert [(r.status, r.stopped_by) for r in rows(database_url, Run)] == [("cancelled", "U0OPS")]
    assert ops_api.restarts == ["api"]  # approved before the stop: it ran, once


# --- item 8: an interrupt on the last iteration keeps the answer -------------------------------

HEALTHY = "The api is healthy and serving."
LATE = "is the cache fine too?"


def check_then_answer(fake: FakeOpenAI) -> Callable[[dict[str, Any]], Turn]:
    """Iteration 1 checks the api (and holds the model's next call: iteration 2, the last);
    iteration 2 answers HEALTHY; the synthesis repeats the agent's draft if it is HEALTHY."""

    def respond(body: dict[str, Any]) -> Turn:
        if body.get("stream"):
            draft = str(body["messages"][-1]["content"])
            return answer(HEALTHY if HEALTHY in draft else "no answer was drafted")
        if not any(m["role"] == "tool" for m in body["messages"]):
            fake.hold()
            return tool_call("ops__get_service", {"name": "api"}, id="call_check")
        return answer(HEALTHY)

    return respond


async def test_a_reply_during_the_last_iteration_keeps_the_final_answer(
    start: Start, database_url: str, fake_slack: FakeSlack, fake_openai: FakeOpenAI
) -> None:
    """REACT_MAX_ITERATIONS=2: a reply (to the other process) reaches the run while the model
    writes its last iteration, a final answer. The thread gets that answer, not the "I stopped
    after 2 iterations" fallback, and the synthesis is told of the reply."""
    fake_openai.respond_with(check_then_answer(fake_openai))
    async with start(react_max_iterations="2") as (a, b, slack):
        event = mention("is the api healthy?", user="U0DEV")
        root = root_of(event)
        try:
            assert await slack.send(a, event) == 200
            await fake_openai.wait_for_requests(2, 30)  # the last iteration's call, held
            assert await slack.send(b, message(LATE, user="U0DEV", thread_ts=root)) == 200
            await reply_reached_the_run(database_url, LATE)
        finally:
            fake_openai.release()
        await runs_ended(database_url, 1)  # (its answer was posted before it ended)
    said = texts(fake_slack, root)
    assert any(HEALTHY in t for t in said) and not any("I stopped after" in t for t in said), said
    [synthesis] = fake_openai.streamed_requests()
    assert LATE in str(synthesis["messages"][-1]["content"])
    assert [r.status for r in rows(database_url, Run)] == ["done"]
