"""Hole 1: "approve for this thread" is no blank cheque.

A grant covers the same tool with the same arguments (but the manifest's `grant_scope.vary`
ones), for the people it names, until it expires; it is never offered, nor accepted, where a
quorum or four-eyes applies; every call it lets through is logged with the grant's id and who
granted it. All through signed Slack events and clicks.
"""

from __future__ import annotations

import copy
import json
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs, urlencode

import pytest
from sqlalchemy import create_engine, update
from sqlmodel import Session

from bot.clock import as_utc, utcnow
from bot.storage import approval_queries
from bot.storage.dbclock import db_now
from bot.storage.models import ApprovalGrant, CallLog
from bot.surfaces.slack.cards import (
    APPROVE_ACTION,
    APPROVE_THREAD_ACTION,
    GRANT_MODAL,
)
from tests.fakes.openai_server import FakeOpenAI, tool_call
from tests.fakes.ops_api import OpsAPI
from tests.fakes.slack_api import FakeSlack
from tests.security.conftest import (
    approval_cards,
    button_ids,
    ephemeral_to,
    finishing,
    is_pending,
    wait_cards,
)
from tests.slack.e2e import SlackBot
from tests.slack.payloads import (
    CHANNEL,
    block_actions,
    grant_submission,
    mention,
    message,
)


def forged(card: dict, action_id: str, *, user: str) -> str:
    """A click, signed like Slack's, on a button the card does not have (as a crafted client
    or a stale card would send): the approve button's payload, reported as `action_id`."""
    body = parse_qs(block_actions(card, APPROVE_ACTION, user=user))
    payload = json.loads(body["payload"][0])
    payload["actions"][0]["action_id"] = action_id
    return urlencode({"payload": json.dumps(payload)})


def forged_grant_dialog(approval_id: str, *, user: str, grantees: list[str]) -> str:
    """The grant dialog's submission, for an approval whose card never offered it."""
    view = {
        "type": "modal",
        "callback_id": GRANT_MODAL,
        "private_metadata": json.dumps({"approval_id": approval_id, "channel": CHANNEL}),
        "blocks": [],
    }
    return grant_submission(view, user=user, grantees=grantees)


async def grant_for_thread(bot: SlackBot, card: dict, *, user: str, grantees: list[str]) -> None:
    """Press "Approve for this thread" and submit its dialog with `grantees` picked."""
    await bot.click(card, APPROVE_THREAD_ACTION, user=user)
    view = bot.fake.calls("views.open")[-1].args["view"]
    assert view["callback_id"] == GRANT_MODAL
    await bot.send(grant_submission(view, user=user, grantees=grantees))


async def test_a_grant_is_never_offered_or_accepted_under_quorum_and_four_eyes(
    bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, ops_api: OpsAPI, db_rows
) -> None:
    """The issue's reproduction: two leads approve scratch-env (quorum 2, four-eyes), the second
    tries "approve for this thread"; a stranger then asks for payments-prod."""
    fake_openai.script(
        *finishing(tool_call("ops__delete", {"name": "scratch-env"})),
        *finishing(tool_call("ops__delete", {"name": "payments-prod"})),
    )
    event = mention("delete scratch-env", user="U0DEV")
    root = event["event"]["ts"]
    await bot.send(event)
    [card] = await wait_cards(fake_slack, root, 1)
    assert APPROVE_THREAD_ACTION not in button_ids(card)
    assert "Approve for this thread" not in json.dumps(card["blocks"])

    await bot.click(card, APPROVE_ACTION, user="U0LEAD")
    await bot.send(forged(card, APPROVE_THREAD_ACTION, user="U0LEAD2"))
    assert any(
        "cannot be approved for the thread" in t for t in ephemeral_to(fake_slack, "U0LEAD2")
    )
    approval_id = card["blocks"][-1]["elements"][0]["value"]
    await bot.send(forged_grant_dialog(approval_id, user="U0LEAD2", grantees=["U0EVE"]))
    assert ops_api.deleted == []  # neither the forged button nor the forged dialog decided
    await bot.click(card, APPROVE_ACTION, user="U0LEAD2")
    await bot.wait_idle()
    assert ops_api.deleted == ["scratch-env"]
    assert db_rows(ApprovalGrant) == []

    await bot.send(message("now delete payments-prod", user="U0EVE", thread_ts=root))
    cards = await wait_cards(fake_slack, root, 2)
    assert is_pending(cards[1]) and "payments-prod" in json.dumps(cards[1]["blocks"])
    assert ops_api.deleted == ["scratch-env"]


async def granted_thread(
    bot: SlackBot,
    fake_openai: FakeOpenAI,
    first: dict[str, Any],
    *later: dict[str, Any],
    grantees: list[str],
) -> tuple[str, dict[str, Any]]:
    """U0DEV asks for `ops__restart(first)`; U0LEAD approves it for the thread, for `grantees`.
    Each later run of the thread calls `ops__restart` with the next of `later`. Returns the
    thread root and the card as it was offered (pending)."""
    fake_openai.script(
        *(turn for args in (first, *later) for turn in finishing(tool_call("ops__restart", args)))
    )
    event = mention("restart api", user="U0DEV")
    root = event["event"]["ts"]
    await bot.send(event)
    [card] = await wait_cards(bot.fake, root, 1)
    offered = copy.deepcopy(card)  # the fake edits the stored card in place
    await grant_for_thread(bot, card, user="U0LEAD", grantees=grantees)
    await bot.wait_idle()
    return root, offered


async def test_a_grant_does_not_cover_other_arguments(
    bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, ops_api: OpsAPI
) -> None:
    root, _ = await granted_thread(
        bot, fake_openai, {"name": "api"}, {"name": "payments"}, grantees=["U0DEV"]
    )
    assert ops_api.restarts == ["api"]
    await bot.send(message("and payments too", user="U0DEV", thread_ts=root))
    cards = await wait_cards(fake_slack, root, 2)
    assert is_pending(cards[1])
    assert ops_api.restarts == ["api"]  # another target: asked again, not run


async def test_a_grant_lets_arguments_it_declares_as_varying_differ(
    bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, ops_api: OpsAPI, db_rows
) -> None:
    """`grant_scope: {vary: [reason]}`: the same service with another reason needs no card;
    every call the grant lets through is logged with the grant and who granted it."""
    root, card = await granted_thread(
        bot,
        fake_openai,
        {"name": "api", "reason": "stuck"},
        {"name": "api", "reason": "stuck again"},
        grantees=["U0DEV"],
    )
    assert "except reason, which may differ" in json.dumps(card["blocks"])
    await bot.send(message("again please", user="U0DEV", thread_ts=root))
    await bot.wait_idle()
    assert ops_api.restarts == ["api", "api"]
    assert len(approval_cards(fake_slack, root)) == 1
    [grant] = db_rows(ApprovalGrant)
    assert grant.granted_by == "U0LEAD" and grant.grantees == ["U0DEV"]
    rows = db_rows(CallLog, tool_name="ops__restart")
    assert [r.approval_status for r in rows] == ["approved", "thread_grant"]
    assert rows[1].grant_id == grant.id and rows[1].approvers == ["U0LEAD"]
    assert rows[1].approval_id == grant.approval_id


async def test_a_grant_covers_only_the_people_it_names(
    bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, ops_api: OpsAPI
) -> None:
    """Granted for U0DEV and U0OPS: U0OPS's same call runs unasked; a stranger's asks again."""
    same = {"name": "api"}
    root, _ = await granted_thread(bot, fake_openai, same, same, same, grantees=["U0DEV", "U0OPS"])
    await bot.send(message("restart api again", user="U0OPS", thread_ts=root))
    await bot.wait_idle()
    assert ops_api.restarts == ["api", "api"]
    assert len(approval_cards(fake_slack, root)) == 1

    await bot.send(message("restart api once more", user="U0EVE", thread_ts=root))
    cards = await wait_cards(fake_slack, root, 2)
    assert is_pending(cards[1])
    assert ops_api.restarts == ["api", "api"]


async def test_a_grant_expires(
    bot: SlackBot,
    fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
    ops_api: OpsAPI,
    database_url: str,
) -> None:
    same = {"name": "api"}
    root, card = await granted_thread(bot, fake_openai, same, same, grantees=["U0DEV"])
    assert "Approve for this thread (15 min)" in json.dumps(card["blocks"])
    await asks_again_once_expired(
        bot, fake_slack, ops_api, database_url, root, utcnow() - timedelta(seconds=1)
    )  # fifteen minutes later


@pytest.mark.both_databases
async def test_a_grant_lasts_its_time_by_the_databases_clock(
    bot: SlackBot,
    fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
    ops_api: OpsAPI,
    database_url: str,
    db_rows: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A grant made on a host whose clock is an hour ahead lasts 15 minutes, not 75; and once
    expired by the database's clock it covers nothing on a host whose clock is an hour behind."""
    real = utcnow
    monkeypatch.setattr(approval_queries, "utcnow", lambda: real() + timedelta(hours=1))
    same = {"name": "api"}
    root, _ = await granted_thread(bot, fake_openai, same, same, grantees=["U0DEV"])
    [grant] = db_rows(ApprovalGrant)
    lasts = (as_utc(grant.expires_at) - real()).total_seconds()
    assert 800 < lasts <= 900 and abs((as_utc(grant.created_at) - real()).total_seconds()) < 60

    monkeypatch.setattr(approval_queries, "utcnow", lambda: real() - timedelta(hours=1))
    # fifteen minutes later, by the database's clock
    await asks_again_once_expired(bot, fake_slack, ops_api, database_url, root, db_now(-1))


async def asks_again_once_expired(
    bot: SlackBot, slack: FakeSlack, ops: OpsAPI, database_url: str, root: str, expired: Any
) -> None:
    """The thread's grants expire at `expired`: the same call is carded again, and waits."""
    engine = create_engine(database_url)
    with Session(engine) as session:
        session.execute(update(ApprovalGrant).values(expires_at=expired))
        session.commit()
    engine.dispose()
    await bot.send(message("restart api again", user="U0DEV", thread_ts=root))
    cards = await wait_cards(slack, root, 2)
    assert is_pending(cards[1])
    assert ops.restarts == ["api"]
