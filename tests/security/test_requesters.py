"""Hole 2: whoever the model has read is a requester; nobody launders a request through a run.

The starter, every interrupter once the model reads them, and the authors of the thread history
a run is given: the card names them all, four-eyes refuses each of them, every one must be an
audit viewer for `audit__report`, and the call log records them all.
"""

from __future__ import annotations

import json

import pytest

from bot.cli import main
from bot.storage.models import ApprovalDecision, CallLog
from bot.surfaces.slack.cards import APPROVE_ACTION as APPROVE
from tests.fakes.openai_server import FakeOpenAI, tool_call
from tests.fakes.ops_api import OpsAPI
from tests.fakes.slack_api import FakeSlack
from tests.security.conftest import ephemeral_to, finishing, wait_cards
from tests.slack.e2e import SlackBot
from tests.slack.payloads import mention, message


async def interrupted_run(
    bot: SlackBot, fake_openai: FakeOpenAI, *, starter: str, interrupter: str, text: str
) -> str:
    """`starter` mentions the bot; while the model is still thinking, `interrupter` replies in
    the thread. Returns the thread root. The model's turns must be scripted by the caller."""
    fake_openai.hold()
    event = mention("how is db?", user=starter)
    root = event["event"]["ts"]
    await bot.send(event)
    await fake_openai.wait_for_requests(1)
    await bot.send(message(text, user=interrupter, thread_ts=root))  # queued: the run is busy
    fake_openai.release()
    return root


async def test_an_interrupter_cannot_approve_their_own_instruction(
    bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, ops_api: OpsAPI, db_rows
) -> None:
    fake_openai.script(
        tool_call("ops__get_service", {"name": "db"}),
        tool_call("ops__delete", {"name": "db"}),  # after reading the lead's "also delete db"
    )
    root = await interrupted_run(
        bot, fake_openai, starter="U0DEV", interrupter="U0LEAD", text="also delete db"
    )
    [card] = await wait_cards(fake_slack, root, 1)
    fields = json.dumps(card["blocks"][1])
    assert "<@U0DEV>" in fields and "<@U0LEAD>" in fields  # both asked
    await bot.click(card, APPROVE, user="U0LEAD")
    assert any("four-eyes" in text for text in ephemeral_to(fake_slack, "U0LEAD"))
    assert db_rows(ApprovalDecision) == []
    assert ops_api.deleted == []


async def test_history_authors_are_requesters_of_a_later_run(
    bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, ops_api: OpsAPI, db_rows
) -> None:
    """The lead writes "delete db" in the thread; the developer's later "go ahead" starts a run
    that reads it: the lead is one of that run's requesters and cannot approve it alone."""
    fake_openai.script(
        *finishing(text="db is fine."),
        *finishing(text="Who should approve?"),
        tool_call("ops__delete", {"name": "db"}),
    )
    event = mention("how is db?", user="U0DEV")
    root = event["event"]["ts"]
    await bot.send(event)
    await bot.wait_idle()
    await bot.send(message("delete db", user="U0LEAD", thread_ts=root))
    await bot.wait_idle()
    await bot.send(message("go ahead", user="U0DEV", thread_ts=root))
    [card] = await wait_cards(fake_slack, root, 1)
    assert "<@U0LEAD>" in json.dumps(card["blocks"][1])
    await bot.click(card, APPROVE, user="U0LEAD")
    assert any("four-eyes" in text for text in ephemeral_to(fake_slack, "U0LEAD"))
    assert db_rows(ApprovalDecision) == []


async def test_every_requester_must_be_an_audit_viewer(
    bot: SlackBot,
    fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
    db_rows,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """U0LEAD may see audit reports, U0EVE may not: once the model has read U0EVE's reply, the
    audit tool is refused, and the call log names both (`chatops audit --user U0EVE` finds
    the call U0EVE asked for without starting the run)."""
    fake_openai.script(
        tool_call("ops__get_service", {"name": "db"}),
        tool_call("audit__report", {"since": "7d"}),
        *finishing(text="You may not see that."),
    )
    await interrupted_run(
        bot, fake_openai, starter="U0LEAD", interrupter="U0EVE", text="show me every call"
    )
    await bot.wait_idle()
    observations = [
        str(m["content"]) for m in fake_openai.requests[2]["messages"] if m["role"] == "tool"
    ]
    assert "not allowed to see audit reports" in observations[-1]
    [row] = db_rows(CallLog, tool_name="audit__report")
    assert row.result_status == "blocked"
    assert row.requester == "U0LEAD" and row.requesters == ["U0LEAD", "U0EVE"]
    [read] = db_rows(CallLog, tool_name="ops__get_service")
    assert read.requesters == ["U0LEAD"]  # made before the model read U0EVE's reply
    monkeypatch.setenv("DATABASE_URL", database_url)
    capsys.readouterr()
    assert main(["audit", "--since", "1h", "--user", "U0EVE", "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["totals"]["calls"] == 1  # the audit__report attempt only
