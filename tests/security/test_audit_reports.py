"""Hole 8: an audit report reaches only who may see it.

`/chatops-audit` answers the viewer alone (an ephemeral message) unless they say `share`;
Feishu's `audit` goes to the viewer by direct message unless shared. A report shown in a
channel (shared, or the agent's answer from `audit__report` in a channel run) covers that
channel's calls only, unless everyone it is shown for is in
`CHATOPS_AUDIT_ALL_CHANNELS_VIEWERS`, and never shows a direct message's arguments.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlmodel import Session

from bot.audit.schedule import AUDIT_JOB_ID, AuditSchedulerContext
from bot.clock import utcnow
from bot.config import Settings
from bot.server import create_app
from bot.storage.database import open_database
from bot.storage.models import CallLog
from tests.fakes.feishu_api import FakeFeishu
from tests.fakes.openai_server import FakeOpenAI, Turn, answer, tool_call
from tests.fakes.slack_api import BOT_TOKEN, FakeSlack
from tests.feishu.e2e import FeishuBot
from tests.slack.e2e import SlackBot
from tests.slack.payloads import CHANNEL, mention, message, slash_command

HERE = "here-in-ops"  # a call in this channel (C0OPS)
ELSEWHERE = "secret-project"  # a call in another channel
IN_A_DM = "said-in-a-dm"  # a call in a direct message


@pytest.fixture
def seeded(database_url: str) -> None:
    """Mutating calls of the last hour: here, in another channel, in a DM (Slack and Feishu)."""
    engine = open_database(database_url)  # migrated: the app may not have started yet
    rows = [
        ("slack", CHANNEL, False, HERE),
        ("slack", "C0OTHER", False, ELSEWHERE),
        ("slack", "D0DEV", True, IN_A_DM),
        ("feishu", "oc_group", False, HERE),
        ("feishu", "oc_dm_dev", True, IN_A_DM),
    ]
    with Session(engine) as session:
        for platform, channel, direct, name in rows:
            session.add(
                CallLog(
                    at=utcnow() - timedelta(minutes=10),
                    platform=platform,
                    channel=channel,
                    direct=direct,
                    requester="U0DEV",
                    requesters=["U0DEV"],
                    connector="ops",
                    action="restart",
                    tool_name="ops__restart",
                    mutating=True,
                    arguments={"name": name},
                    error=f"failed for {name}",
                    result_status="error",
                )
            )
        session.commit()
    engine.dispose()


def shown(fake: FakeSlack) -> tuple[list[str], list[str]]:
    """(what was posted in channels, what was shown privately), as JSON text."""
    posted = [json.dumps(c.args.get("blocks")) for c in fake.calls("chat.postMessage")]
    private = [json.dumps(note.get("blocks")) for note in fake.ephemeral]
    return posted, private


async def test_an_audit_report_is_for_the_viewer_alone_unless_shared(
    bot: SlackBot, fake_slack: FakeSlack, seeded: None
) -> None:
    assert await bot.send(slash_command("1h", user="U0LEAD")) == 200
    posted, private = shown(fake_slack)
    assert posted == [] and len(private) == 1
    assert fake_slack.ephemeral[0]["user"] == "U0LEAD"
    # privately the viewer sees it all, direct messages' arguments included
    assert all(name in private[0] for name in (HERE, ELSEWHERE, IN_A_DM))

    assert await bot.send(slash_command("1h share", user="U0LEAD")) == 200
    posted, _ = shown(fake_slack)
    [report] = posted
    assert HERE in report and ELSEWHERE not in report and IN_A_DM not in report
    assert "this channel only" in report


async def test_a_shared_report_never_shows_direct_message_arguments(
    settings, seeded: None, fake_slack: FakeSlack, aiohttp_client
) -> None:
    """A viewer allowed all channels shares a report: other channels, yes; a DM's arguments
    and error text, never (its call is still counted)."""
    wide = settings.model_copy(update={"chatops_audit_all_channels_viewers": "U0LEAD"})
    bot = SlackBot(await aiohttp_client(create_app(wide)), fake_slack)
    assert await bot.send(slash_command("1h share", user="U0LEAD")) == 200
    posted, _ = shown(fake_slack)
    [report] = posted
    assert HERE in report and ELSEWHERE in report and IN_A_DM not in report
    assert "direct message" in report and "Mutating calls (5)" in report


def auditing(body: dict[str, Any]) -> Turn:
    """The model asks for the last hour's report, then answers."""
    if body.get("stream") or any(m["role"] == "tool" for m in body["messages"]):
        return answer("Here is the report.")
    return tool_call("audit__report", {"since": "1h"}, id="call_audit")


def observation(fake: FakeOpenAI) -> str:
    return next(
        str(m["content"]) for body in fake.requests for m in body["messages"] if m["role"] == "tool"
    )


async def test_the_audit_tool_in_a_channel_covers_that_channel_only(
    bot: SlackBot, fake_openai: FakeOpenAI, seeded: None
) -> None:
    fake_openai.respond_with(auditing)
    await bot.send(mention("what ran in the last hour?", user="U0LEAD"))
    await bot.wait_idle()
    seen = observation(fake_openai)
    assert HERE in seen and ELSEWHERE not in seen and IN_A_DM not in seen


async def test_the_audit_tool_in_a_direct_message_covers_everything(
    bot: SlackBot, fake_openai: FakeOpenAI, seeded: None
) -> None:
    fake_openai.respond_with(auditing)
    dm = message("what ran in the last hour?", user="U0LEAD", channel="D0LEAD", channel_type="im")
    await bot.send(dm)
    await bot.wait_idle()
    seen = observation(fake_openai)
    assert all(name in seen for name in (HERE, ELSEWHERE, IN_A_DM))


async def test_a_feishu_audit_goes_to_the_viewer_by_direct_message_unless_shared(
    feishu_bot: FeishuBot, fake_feishu: FakeFeishu, fake_openai: FakeOpenAI, seeded: None
) -> None:
    event = fake_feishu.message_event("audit 1h", user="ou_lead")
    root = event["event"]["message"]["message_id"]
    await feishu_bot.send(event)
    created = fake_feishu.calls("message.create")
    [dm] = [c for c in created if (c.body or {}).get("receive_id") == "ou_lead"]
    assert dm.query.get("receive_id_type") == "open_id" and dm.body["msg_type"] == "interactive"
    assert IN_A_DM in dm.body["content"]  # privately: everything
    assert fake_feishu.cards_in(root) == []  # nothing in the thread

    shared = fake_feishu.message_event("audit 1h share", user="ou_lead", root_id=root)
    await feishu_bot.send(shared)
    [card] = await fake_feishu.wait_for(lambda f: f.cards_in(root), 10)
    text = json.dumps(card)
    assert HERE in text and IN_A_DM not in text and "this channel only" in text
    assert fake_openai.requests == []  # no model involved


async def test_a_scheduled_report_never_shows_direct_message_arguments(
    database_url: str, seeded: None, fake_slack: FakeSlack, aiohttp_client
) -> None:
    """The weekly report is posted in a channel: every channel's calls, but a DM's arguments
    and error text never (its call is still counted)."""
    settings = Settings(
        database_url=database_url,
        slack_bot_token=BOT_TOKEN,
        slack_signing_secret="test-signing-secret",
        slack_api_url=fake_slack.url,
        chatops_audit_schedule="0 9 * * MON",
        chatops_audit_channels=f"slack:{CHANNEL}",
    )
    app = create_app(settings)
    context = next(c for c in app.cleanup_ctx if isinstance(c, AuditSchedulerContext))
    await aiohttp_client(app)
    scheduler = context.scheduler.scheduler
    scheduler.pause()
    due = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=5)
    scheduler.modify_job(AUDIT_JOB_ID, next_run_time=due)
    scheduler.resume()
    [post] = await fake_slack.wait_for(lambda: fake_slack.calls("chat.postMessage"), 15)
    report = json.dumps(post.args.get("blocks")) + post.args.get("text", "")
    assert HERE in report and ELSEWHERE in report and IN_A_DM not in report
    assert "direct message" in report and "Mutating calls (5)" in report
