"""One reminder per approver across two real `chatops serve` processes on one PostgreSQL
database: A owns the run and DMs the lead a reminder, A is killed (`kill -9`), B adopts the
run once A's lease lapsed and resumes its wait past the reminder's time; B claims the lead's
reminder in the database, finds it taken, and sends none. The lead's click on the reminder's
copy, sent to B, decides."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import pytest

from bot.storage.models import ApprovalCard, ApprovalReminder
from bot.surfaces.slack.cards import APPROVE_ACTION
from tests.approvals.test_routing import cards_in_channel
from tests.databases import rows
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.ops_api import OpsAPI, restart_then_answer
from tests.fakes.slack_api import FakeSlack
from tests.server.serve_process import SlackSender
from tests.server.test_processes import answered, card_recorded, two_processes
from tests.slack.e2e import wait_card
from tests.slack.payloads import block_actions, mention

pytestmark = pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)


async def test_a_reminder_is_sent_once_though_another_process_resumes_the_wait(
    tmp_path: Path, database_url: str, ops_api: OpsAPI, fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
) -> None:  # fmt: skip
    fake_openai.respond_with(restart_then_answer)
    event = mention("restart api", user="U0DEV")
    root = event["event"]["ts"]
    # the reminder at 6 s, the deadline at 60 s: far beyond A's lease (3 s) lapsing
    settings = {"chatops_approval_timeout_s": "60", "chatops_approval_remind_at": "0.1"}
    async with (
        aiohttp.ClientSession() as http,
        two_processes(tmp_path, database_url, ops_api, fake_slack, fake_openai,
                      same_host=False, **settings) as (a, b),
    ):  # fmt: skip
        slack = SlackSender(http)
        assert await slack.send(a, event) == 200
        await wait_card(fake_slack, root, pending=True)
        await card_recorded(database_url)
        [reminder] = await fake_slack.wait_for(
            lambda: cards_in_channel(fake_slack, fake_slack.dms.get("U0LEAD", "")), 30
        )
        await a.wait_log("reminded U0LEAD")  # recorded where it was sent
        await a.kill()
        await b.wait_log("adopted run", 30)
        await b.wait_log("U0LEAD was reminded already", 30)  # B's resumed wait: claim lost
        dm = fake_slack.dms["U0LEAD"]
        click = block_actions(reminder, APPROVE_ACTION, user="U0LEAD", channel=dm)
        assert await slack.send(b, click) == 200
        await answered(fake_slack, root)
    assert ops_api.restarts == ["api"]
    posts = [c for c in fake_slack.calls("chat.postMessage") if c.args.get("channel") == dm]
    assert len(posts) == 1
    assert [r.user_id for r in rows(database_url, ApprovalReminder)] == ["U0LEAD"]
    assert [c.kind for c in rows(database_url, ApprovalCard)] == ["thread", "reminder"]
