"""Issue 26, item 4: a run whose model fails counts as failed in the audit, and says why.

A refused model key makes no call, so the call log never sees the run: the audit's runs by
outcome do. The real app on Slack (signed mentions and slash commands) with FakeOpenAI
answering 401 with the key in its message, then the real `chatops audit` CLI and the chat
command; on SQLite and PostgreSQL. A report shown in a channel counts only that channel's runs
and never shows why a direct message's run failed.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from bot.cli import main
from bot.server import create_app
from bot.storage.models import CallLog, Run
from tests.fakes.openai_server import FakeOpenAI, answer, error
from tests.fakes.slack_api import FakeSlack
from tests.slack.e2e import SlackBot
from tests.slack.payloads import CHANNEL, mention, message, slash_command

MODEL_KEY = "sk-test-not-a-secret"  # what `bot_settings` sets as OPENAI_API_KEY
REFUSED = "refused the key (401)"
OTHER = "C0OTHER"


async def run_twice(bot: SlackBot, fake_openai: FakeOpenAI, failing: dict[str, Any],
                    working: dict[str, Any]) -> None:  # fmt: skip
    """One run whose model refuses its key (echoing it), then one that answers."""
    fake_openai.script(
        error(401, message=f"Incorrect API key provided: {MODEL_KEY}"),
        answer("api is fine"),
        answer("api is fine"),
    )
    for event in (failing, working):
        await bot.send(event)
        await bot.wait_idle()


async def test_a_run_whose_model_refused_its_key_counts_as_failed_in_the_audit(
    bot: SlackBot, fake_openai: FakeOpenAI, database_url: str, db_rows: Any,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    await run_twice(bot, fake_openai, mention("how is api?"), mention("and now?"))
    assert sorted(run.status for run in db_rows(Run)) == ["done", "failed"]
    assert db_rows(CallLog) == []  # the failure made no call: only the runs can tell

    monkeypatch.setenv("DATABASE_URL", database_url)
    capsys.readouterr()
    assert await asyncio.to_thread(main, ["audit", "--since", "1d", "--format", "json"]) == 0
    out = capsys.readouterr().out
    runs = json.loads(out)["runs"]
    assert (runs["started"], runs["done"], runs["failed"], runs["cancelled"]) == (2, 1, 1, 0)
    [why] = runs["errors"]
    assert why["count"] == 1 and REFUSED in why["error"] and "127.0.0.1" in why["error"]
    assert MODEL_KEY not in out

    assert await asyncio.to_thread(main, ["audit", "--since", "1d"]) == 0
    markdown = capsys.readouterr().out
    assert "| 2 | 1 | 1 | 0 |" in markdown and "### Why runs failed" in markdown
    assert REFUSED in markdown and MODEL_KEY not in markdown


def audit_reports(fake: FakeSlack) -> tuple[list[str], list[str]]:
    """(audit reports posted in channels, those shown privately), as JSON text."""
    posted = [json.dumps(c.args.get("blocks")) for c in fake.calls("chat.postMessage")]
    private = [json.dumps(note.get("blocks")) for note in fake.ephemeral]
    return [p for p in posted if "Audit report" in p], [p for p in private if "Audit report" in p]


async def test_a_report_shared_in_a_channel_leaves_out_another_channels_failed_run(
    bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI
) -> None:
    """The model fails in C0OTHER and answers in C0OPS: shared in C0OPS, the report counts
    C0OPS's done run only; the viewer alone sees both, and why the other failed."""
    await run_twice(bot, fake_openai, mention("how is api?", channel=OTHER), mention("and now?"))

    assert await bot.send(slash_command("1d share", user="U0LEAD", channel=CHANNEL)) == 200
    [shared], _ = audit_reports(fake_slack)
    assert "*Runs*: runs 1, done 1, failed 0" in shared and REFUSED not in shared

    assert await bot.send(slash_command("1d", user="U0LEAD", channel=CHANNEL)) == 200
    _, [private] = audit_reports(fake_slack)
    assert "*Runs*: runs 2, done 1, failed 1" in private and REFUSED in private
    assert MODEL_KEY not in json.dumps([c.args for c in fake_slack.calls()] + fake_slack.ephemeral)


async def test_a_shared_report_counts_a_direct_messages_failed_run_without_its_error(
    settings: Any, fake_slack: FakeSlack, fake_openai: FakeOpenAI, aiohttp_client: Any
) -> None:
    """A viewer allowed every channel shares a report: the run that failed in a direct
    message is counted, why it failed is not shown (it may quote what was asked there)."""
    wide = settings.model_copy(update={"chatops_audit_all_channels_viewers": "U0LEAD"})
    bot = SlackBot(await aiohttp_client(create_app(wide)), fake_slack)
    dm = message("how is api?", user="U0DEV", channel="D0DEV", channel_type="im")
    await run_twice(bot, fake_openai, dm, mention("and now?"))

    assert await bot.send(slash_command("1d share", user="U0LEAD", channel=CHANNEL)) == 200
    [shared], _ = audit_reports(fake_slack)
    assert "*Runs*: runs 2, done 1, failed 1" in shared and REFUSED not in shared
