"""Hole 9: no approval outlives its run.

Whatever ends a run (done, failed, cancelled; a run a restart interrupted is failed the same
way) ends its approvals still pending, and their cards say so: a click on a live card of a
finished run must not approve a call that nobody will make, nor make one. The engine also
never leaves a call of a parallel batch running (or waiting at the gate) after the batch failed.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from sqlalchemy import create_engine, update
from sqlmodel import Session

import bot.engine.execution as execution
from bot.runs.recovery import INTERRUPTED
from bot.server import RUNTIME_KEY, create_app
from bot.storage.models import Approval, CallLog, Run
from bot.surfaces.slack.cards import APPROVE_ACTION
from tests.fakes.openai_server import FakeOpenAI, answer, tool_call, tool_calls
from tests.fakes.ops_api import OpsAPI
from tests.fakes.slack_api import FakeSlack
from tests.security.conftest import approval_cards, ephemeral_to, is_pending, wait_cards
from tests.slack.e2e import SlackBot
from tests.slack.payloads import mention


async def test_a_failed_run_cancels_the_approval_a_parallel_call_waits_for(
    bot: SlackBot,
    fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
    ops_api: OpsAPI,
    db_rows,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One reply asks for a restart (waits for its card) and a status read; reading the status
    fails hard, a bug (injected here: the engine's own step around the tool raises). The run
    fails; the restart's card ends as cancelled, and a lead's click on it changes nothing."""
    real_invoke = execution._invoke
    event = mention("restart api and show me its status", user="U0DEV")
    root = event["event"]["ts"]

    async def failing_invoke(tool: Any, args: dict[str, Any], audience: Any) -> Any:
        if tool.name == "ops__get_service":  # once the restart waits at its card
            await fake_slack.wait_for(lambda: approval_cards(fake_slack, root), 60)
            raise RuntimeError("a bug in the step around a tool")
        return await real_invoke(tool, args, audience)

    monkeypatch.setattr(execution, "_invoke", failing_invoke)
    fake_openai.script(
        tool_calls(("ops__restart", {"name": "api"}), ("ops__get_service", {"name": "api"})),
        answer("unused"),
    )
    await bot.send(event)
    [card] = await wait_cards(fake_slack, root, 1)
    await bot.wait_idle()

    assert [r.status for r in db_rows(Run)] == ["failed"]
    [approval] = db_rows(Approval)
    assert approval.status == "cancelled" and "the run ended (failed)" in approval.decision_reason
    [card] = approval_cards(fake_slack, root)
    assert not is_pending(card) and "Cancelled" in json.dumps(card["blocks"])
    await bot.click(card_with_buttons(card, approval.id), APPROVE_ACTION, user="U0LEAD")
    assert any("cancelled" in note for note in ephemeral_to(fake_slack, "U0LEAD"))
    assert ops_api.restarts == []
    assert not [
        c for c in db_rows(CallLog) if c.tool_name == "ops__restart" and c.result_status == "ok"
    ]


def card_with_buttons(card: dict[str, Any], approval_id: str) -> dict[str, Any]:
    """The card as a client that has not refreshed it still shows it (its buttons)."""
    buttons = {"type": "actions", "block_id": "chatops_approval", "elements": [
        {"type": "button", "text": {"type": "plain_text", "text": "Approve"},
         "action_id": APPROVE_ACTION, "value": approval_id},
    ]}  # fmt: skip
    return {**card, "blocks": [*card["blocks"], buttons]}


async def test_a_run_failed_by_start_up_recovery_cancels_its_approval_and_its_card(
    settings, fake_slack: FakeSlack, fake_openai: FakeOpenAI, ops_api: OpsAPI, database_url: str,
    db_rows,
) -> None:  # fmt: skip
    """The bot stops while a run waits at a card, and the run cannot be resumed (its checkpoint
    is gone): the next start-up fails it, ends the approval as cancelled and edits the card,
    and a lead's click on the card as a stale client still shows it runs nothing."""
    fake_openai.script(tool_call("ops__restart", {"name": "api"}), answer("unused"))
    event = mention("restart api", user="U0DEV")
    root = event["event"]["ts"]
    first = TestClient(TestServer(create_app(settings)))
    await first.start_server()
    try:
        await SlackBot(first, fake_slack).send(event)
        [card] = await wait_cards(fake_slack, root, 1)
    finally:
        await first.close()
    assert [r.status for r in db_rows(Run)] == ["waiting_approval"]
    engine = create_engine(database_url)  # lost: the run cannot continue where it stopped
    with Session(engine) as session:
        session.execute(update(Run).values(checkpoint=None))
        session.commit()
    engine.dispose()

    second = TestClient(TestServer(create_app(settings)))
    await second.start_server()
    try:
        await second.app[RUNTIME_KEY].recovery.wait(30)
        [run] = db_rows(Run)
        assert (run.status, run.error) == ("failed", INTERRUPTED)
        [approval] = db_rows(Approval)
        assert approval.status == "cancelled"
        [card] = approval_cards(fake_slack, root)
        assert not is_pending(card) and "Cancelled" in json.dumps(card["blocks"])
        bot = SlackBot(second, fake_slack)
        await bot.click(card_with_buttons(card, approval.id), APPROVE_ACTION, user="U0LEAD")
        await bot.wait_idle()
        # the ending recovery won is counted by the process that won it
        scrape = await (await second.get("/metrics")).text()
        assert 'chatops_runs_total{outcome="failed"} 1.0' in scrape
        assert 'chatops_runs_total{outcome="done"} 0.0' in scrape
    finally:
        await second.close()
    assert ops_api.restarts == []
    assert [a.status for a in db_rows(Approval)] == ["cancelled"]
