"""Reminders before expiry, then expiry, through the real entry points with a controllable
clock (`ManualClock`): at `CHATOPS_APPROVAL_REMIND_AT` of the timeout each named approver who
has not answered gets one direct message with the card's buttons (Slack: conversations.open
and chat.postMessage; Feishu: a message to the open_id), a click there decides, a restart
does not remind anyone twice, and a request nobody decides ends **expired**: on every copy of
the card, in the call log, in the audit report and in what the model reads, never as a
rejection. On SQLite and PostgreSQL.

The routed manifest's default policy (`env: dev`, no rule) asks the leads, four-eyes, in the
thread, for `CHATOPS_APPROVAL_TIMEOUT_S` (3600 s); reminders come at half of it.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from sqlalchemy import create_engine

from bot.audit.report import AuditQuery, build_report
from bot.clock import ManualClock
from bot.config import Settings
from bot.server import create_app
from bot.storage.models import (
    Approval,
    ApprovalCard,
    ApprovalDecision,
    ApprovalReminder,
    CallLog,
)
from bot.surfaces.slack.cards import APPROVE_ACTION
from tests.approvals.test_routing import cards_in_channel, eventually, feishu_cards_in
from tests.approvals.test_rules import restart, tool_texts
from tests.fakes.feishu_api import FakeFeishu
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.ops_api import OpsAPI
from tests.fakes.slack_api import FakeSlack
from tests.feishu.e2e import FeishuBot, approval_message, has_form, plain_text_of
from tests.feishu.e2e import bot_settings as feishu_settings
from tests.security.conftest import is_pending, wait_cards
from tests.slack.e2e import SlackBot
from tests.slack.payloads import CHANNEL, block_actions, mention

pytestmark = pytest.mark.both_databases  # the claim is a unique row: each dialect's own

HALF = 1800  # CHATOPS_APPROVAL_REMIND_AT=0.5 of the 3600 s timeout
REMINDER = "Reminder: nobody has decided yet"
LEADS = ["U0LEAD", "U0LEAD2"]


@pytest.fixture
def reminding_settings(routed_slack_settings: Settings) -> Settings:
    return routed_slack_settings.model_copy(update={"chatops_approval_remind_at": 0.5})


@pytest.fixture
async def reminding_slack(
    reminding_settings: Settings, fake_slack: FakeSlack, clock: ManualClock, aiohttp_client: Any
) -> SlackBot:
    bot = SlackBot(await aiohttp_client(create_app(reminding_settings, clock=clock)), fake_slack)
    bot.lift_edit_budget()  # the card and its DM copies are edited at once when it ends
    return bot


def dm_posts(fake: FakeSlack) -> list[Any]:
    """chat.postMessage calls into a direct-message channel (the reminders)."""
    channels = set(fake.dms.values())
    return [c for c in fake.calls("chat.postMessage") if c.args.get("channel") in channels]


async def reminded(fake: FakeSlack, users: list[str]) -> dict[str, dict[str, Any]]:
    """Wait until each of `users` has one reminder card in their DM; user -> that card."""

    def found() -> dict[str, dict[str, Any]] | None:
        cards = {u: cards_in_channel(fake, fake.dms.get(u, "")) for u in users}
        return {u: c[0] for u, c in cards.items()} if all(cards.values()) else None

    return await fake.wait_for(found, 15)


def thread_card(fake: FakeSlack, root: str) -> dict[str, Any]:
    """The approval card in the requesting thread, as it is now."""
    [card] = [
        m for m in fake.thread_messages(CHANNEL, root)
        if m.get("blocks") and m["blocks"][0].get("type") == "header"
    ]  # fmt: skip
    return card


async def test_slack_each_lead_is_reminded_by_dm_and_a_click_there_decides(
    reminding_slack: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, ops_api: OpsAPI,
    clock: ManualClock, db_rows,
) -> None:  # fmt: skip
    fake_openai.script(*restart("api", "dev"))
    event = mention("restart api on dev", user="U0DEV")
    root = event["event"]["ts"]
    await reminding_slack.send(event)
    [card] = await wait_cards(fake_slack, root, 1)
    clock.advance(HALF - 1)  # not yet
    clock.advance(2)
    dms = await reminded(fake_slack, LEADS)
    opened = sorted(c.args["users"] for c in fake_slack.calls("conversations.open"))
    assert opened == LEADS  # the requester (four-eyes) is not asked
    for copy in dms.values():
        assert is_pending(copy) and REMINDER in json.dumps(copy["blocks"])
        assert "expires in 30 min" in json.dumps(copy["blocks"])
    assert is_pending(card) and REMINDER not in json.dumps(card["blocks"])

    lead2 = fake_slack.dms["U0LEAD2"]
    await reminding_slack.send(
        block_actions(dms["U0LEAD2"], APPROVE_ACTION, user="U0LEAD2", channel=lead2)
    )
    await reminding_slack.wait_idle()
    assert ops_api.restarts == ["api"]
    [approval] = db_rows(Approval)
    assert (approval.status, approval.decided_by) == ("approved", ["U0LEAD2"])
    for user in LEADS:  # every copy shows the outcome, the reminders too
        await fake_slack.wait_for(
            lambda u=user: not is_pending(cards_in_channel(fake_slack, fake_slack.dms[u])[0])
        )
    await fake_slack.wait_for(lambda: not is_pending(thread_card(fake_slack, root)))
    kinds = sorted((c.kind, c.user_id) for c in db_rows(ApprovalCard))
    assert kinds == [("reminder", "U0LEAD"), ("reminder", "U0LEAD2"), ("thread", "")]
    assert len(dm_posts(fake_slack)) == 2


async def test_slack_a_lead_who_approved_is_not_reminded_of_a_quorum(
    reminding_settings: Settings, fake_slack: FakeSlack, fake_openai: FakeOpenAI,
    clock: ManualClock, aiohttp_client: Any, tmp_path, ops_api: OpsAPI, db_rows,
) -> None:  # fmt: skip
    """Two leads must approve (the `rules` manifest's production rule): the one who did is not
    reminded, the one who did not is."""
    from tests.approvals.conftest import write_manifest

    (tmp_path / "quorum").mkdir()
    settings = reminding_settings.model_copy(
        update={
            "chatops_manifests_dir": write_manifest(tmp_path / "quorum", ops_api.url, lead="U0LEAD")
        }  # fmt: skip
    )
    bot = SlackBot(await aiohttp_client(create_app(settings, clock=clock)), fake_slack)
    fake_openai.script(*restart("api", "production"))
    event = mention("restart api on production", user="U0DEV")
    await bot.send(event)
    [card] = await wait_cards(fake_slack, event["event"]["ts"], 1)
    await bot.click(card, APPROVE_ACTION, user="U0LEAD")
    await eventually(lambda: db_rows(ApprovalDecision))
    clock.advance(HALF + 1)
    await reminded(fake_slack, ["U0LEAD2"])
    await eventually(lambda: db_rows(ApprovalReminder))
    assert [r.user_id for r in db_rows(ApprovalReminder)] == ["U0LEAD2"]
    assert "U0LEAD" not in fake_slack.dms


async def test_slack_a_restart_reminds_nobody_twice_and_the_request_then_expires(
    reminding_slack: SlackBot, reminding_settings: Settings, fake_slack: FakeSlack,
    fake_openai: FakeOpenAI, ops_api: OpsAPI, clock: ManualClock, aiohttp_client: Any,
    database_url: str, caplog: pytest.LogCaptureFixture, db_rows,
) -> None:  # fmt: skip
    caplog.set_level(logging.INFO, logger="bot.approvals.reminders")
    fake_openai.script(*restart("api", "dev"))
    event = mention("restart api on dev", user="U0DEV")
    root = event["event"]["ts"]
    await reminding_slack.send(event)
    [card] = await wait_cards(fake_slack, root, 1)
    clock.advance(HALF + 1)
    await reminded(fake_slack, LEADS)
    # the bot stops while the approval waits, once each reminder is recorded with its card
    # (the copy the expiry edits; the post and its record go together, even through a stop)
    await eventually(lambda: len(db_rows(ApprovalCard, kind="reminder")) == len(LEADS))
    await reminding_slack.client.close()
    restarted = SlackBot(
        await aiohttp_client(create_app(reminding_settings, clock=clock)), fake_slack
    )
    restarted.lift_edit_budget()
    for user in LEADS:  # the resumed wait is past the reminder's time: it claims, and loses
        await eventually(lambda u=user: f"{u} was reminded already" in caplog.text)
    clock.advance(HALF)  # past the deadline
    await restarted.wait_idle()
    assert ops_api.calls == []
    assert len(dm_posts(fake_slack)) == 2  # one reminder each, across the restart

    [approval] = db_rows(Approval)
    assert (approval.status, approval.decided_by) == ("expired", [])
    ended = await fake_slack.wait_for(lambda: (c := thread_card(fake_slack, root))
                                      and not is_pending(c) and c, 30)  # fmt: skip
    shown = json.dumps(ended["blocks"])
    assert "Expired" in shown and "Rejected" not in shown
    for user in LEADS:
        copy = await fake_slack.wait_for(
            lambda u=user: (
                (c := cards_in_channel(fake_slack, fake_slack.dms[u])[0])
                and not is_pending(c)
                and c
            ),
            30,
        )
        assert "Expired" in json.dumps(copy["blocks"])
    [logged] = db_rows(CallLog, tool_name="ops__restart")
    assert (logged.approval_status, logged.result_status) == ("expired", "expired")
    assert any("TIMED OUT" in t and "not a rejection" in t for t in tool_texts(fake_openai))
    engine = create_engine(database_url)
    try:
        report = build_report(engine, AuditQuery.window("7d"))
    finally:
        engine.dispose()
    assert (report.totals.expired, report.totals.rejected) == (1, 0)
    assert (report.approvals.expired, report.approvals.rejected) == (1, 0)


@pytest.fixture
async def reminding_feishu(
    tmp_path, database_url: str, ops_api: OpsAPI, fake_feishu: FakeFeishu,
    fake_openai: FakeOpenAI, clock: ManualClock, aiohttp_client: Any,
) -> FeishuBot:  # fmt: skip
    from tests.approvals.conftest import write_routed_manifest

    manifests = write_routed_manifest(
        tmp_path, ops_api.url, lead="ou_lead", boss="ou_boss", channel="oc_approvals"
    )
    settings = feishu_settings(
        database_url=database_url,
        manifests=manifests,
        fake=fake_feishu,
        llm_url=fake_openai.base_url,
        chatops_approver_groups={"leads": ["ou_lead", "ou_lead2"]},
        chatops_approval_remind_at=0.5,
    )
    return FeishuBot(await aiohttp_client(create_app(settings, clock=clock)), fake_feishu)


async def test_feishu_leads_are_reminded_by_open_id_and_the_request_expires(
    reminding_feishu: FeishuBot, fake_openai: FakeOpenAI, ops_api: OpsAPI, clock: ManualClock,
    db_rows,
) -> None:  # fmt: skip
    fake = reminding_feishu.fake
    fake_openai.script(*restart("api", "dev"))
    event = fake.message_event("restart api on dev", user="ou_dev")
    root = event["event"]["message"]["message_id"]
    await reminding_feishu.send(event)
    await eventually(lambda: db_rows(ApprovalCard))
    clock.advance(HALF + 1)
    dms = ["oc_p2p_ou_lead", "oc_p2p_ou_lead2"]
    await fake.wait_for(lambda f: all(feishu_cards_in(f, chat) for chat in dms))
    sent = [c for c in fake.calls("message.create") if c.query["receive_id_type"] == "open_id"]
    assert sorted(c.body["receive_id"] for c in sent) == ["ou_lead", "ou_lead2"]
    for chat in dms:
        [copy] = feishu_cards_in(fake, chat)
        content = json.loads(copy.contents[-1])
        assert has_form(content) and REMINDER in plain_text_of(content)

    clock.advance(HALF)
    await reminding_feishu.wait_idle()
    [approval] = db_rows(Approval)
    assert approval.status == "expired" and ops_api.calls == []
    for chat in dms:
        [copy] = feishu_cards_in(fake, chat)
        await fake.wait_for(lambda f, m=copy.message_id: not has_form(json.loads(
            f.messages[m].contents[-1])))  # fmt: skip
        assert "Expired" in fake.messages[copy.message_id].contents[-1]
    await fake.wait_for(lambda f: "Expired" in approval_message(f, root).contents[-1])
    [logged] = db_rows(CallLog, tool_name="ops__restart")
    assert (logged.approval_status, logged.result_status) == ("expired", "expired")
