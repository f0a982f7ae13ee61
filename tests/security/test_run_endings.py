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

import bot.engine.execution as execution
from bot.storage.models import Approval, CallLog, Run
from bot.surfaces.slack.cards import APPROVE_ACTION
from tests.fakes.openai_server import FakeOpenAI, answer, tool_calls
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
