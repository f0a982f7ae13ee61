"""Approve all clicked while the batch card is being recorded decides exactly the calls the card
showed: the card is posted first and recorded on its calls after, so a click can land between
the two. The real app (`create_app`) on Slack, a signed `block_actions` click.

The window is held open by a hook on the app's database engine (SQLAlchemy's
`before_cursor_execute`): the second call's record on the card waits until the test lets it go.
PostgreSQL only: on SQLite every store call goes through one worker thread, so a held record
holds the click's reads too and no click can land inside the window (the window is the same).
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.pool import NullPool

from bot.server import RUNTIME_KEY
from bot.statuses import ApprovalStatus
from bot.storage.models import Approval, ApprovalDecision
from bot.surfaces.slack.batch_card import APPROVE_ALL_ACTION
from tests.approvals.test_batches_feishu import ask_batch as ask_feishu_batch
from tests.approvals.test_batches_slack import (  # noqa: F401
    ask_batch,
    bot,
    by_name,
    call_ids,
    restarts,
    settings,
)
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.ops_api import OpsAPI
from tests.fakes.slack_api import FakeSlack
from tests.feishu.e2e import FeishuBot
from tests.security.conftest import approval_cards
from tests.slack.e2e import SlackBot
from tests.slack.payloads import as_body, block_actions, mention, signed_headers

pytestmark = pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)

HOLD_S = 2.0  # the click's chance to act inside the window (under the 5 s a click waits)


class RecordHeld:
    """Makes the first post list both calls, then holds its record half way.

    The calls of a response are asked in parallel; here the first card post's read of the
    batch waits until both calls are asked (two approval rows, read through a connection of its
    own), so the card lists both. Then the second `INSERT INTO approval_card` (the second call
    recorded on the card) waits in its database worker thread until `release` is set."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.reached = threading.Event()
        self.release = threading.Event()
        self._watch = create_engine(engine.url, poolclass=NullPool)
        self._read = 0
        self._recorded = 0
        self._lock = threading.Lock()

    def _both_asked(self) -> None:
        with self._watch.connect() as conn:
            for _ in range(200):
                if conn.execute(text("SELECT count(*) FROM approval")).scalar() == 2:
                    return
                conn.rollback()
                self.release.wait(0.05)

    def executing(self, _conn: Any, _cursor: Any, statement: str, *_rest: Any) -> None:
        sql = statement.lstrip().upper()
        if sql.startswith("SELECT") and "APPROVAL.BATCH_ID =" in sql:
            with self._lock:
                self._read += 1
                first = self._read == 1
            if first:
                self._both_asked()
        elif sql.startswith("INSERT INTO APPROVAL_CARD"):
            with self._lock:
                self._recorded += 1
                second = self._recorded == 2
            if second:
                self.reached.set()
                self.release.wait(30)

    def __enter__(self) -> RecordHeld:
        event.listen(self.engine, "before_cursor_execute", self.executing)
        return self

    def __exit__(self, *_exc: object) -> None:
        self.release.set()
        event.remove(self.engine, "before_cursor_execute", self.executing)
        self._watch.dispose()


async def test_approve_all_between_the_post_and_its_record_decides_every_call_shown(
    bot: SlackBot,  # noqa: F811
    fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
    ops_api: OpsAPI,
    db_rows: Any,
) -> None:
    engine = bot.app[RUNTIME_KEY].db.engine  # type: ignore[attr-defined]
    with RecordHeld(engine) as held:
        _root, card = await ask_batch(bot, fake_slack, fake_openai, ("api", "dev"),
                                      ("web", "dev"))  # fmt: skip
        assert await asyncio.to_thread(held.reached.wait, 10), "the record never started"
        # the card lists both calls; U0LEAD may approve both; its record is still under way
        # (sent without waiting for the handler: in the old code it waits on the batch's lock)
        body = block_actions(card, APPROVE_ALL_ACTION, user="U0LEAD")
        response = await bot.client.post("/slack/events", data=body,
                                         headers=signed_headers(body))  # fmt: skip
        assert response.status == 200
        for _ in range(int(HOLD_S / 0.05)):  # the old code decided part of the card at once
            if db_rows(ApprovalDecision):
                break
            await asyncio.sleep(0.05)
        held.release.set()
        for _ in range(200):  # both decided (a part decided leaves one pending)
            if all(r.status != ApprovalStatus.PENDING for r in db_rows(Approval)):
                break
            await asyncio.sleep(0.05)
    rows = by_name(db_rows(Approval))
    # every call the card showed, never a part of them
    assert {name: r.status for name, r in rows.items()} == {
        "api": ApprovalStatus.APPROVED, "web": ApprovalStatus.APPROVED,
    }  # fmt: skip
    assert all(r.card_message_id == card["ts"] for r in rows.values())
    await bot.wait_idle()
    assert sorted(ops_api.restarts) == ["api", "web"]


class JoinerHeld:
    """A card of two calls whose record waits, and a third call asked after it was posted.

    The first post's read of the batch waits until two calls are asked; the third call's row
    waits until that read is done (so the card lists two calls); the first record on the card
    waits until `release` is set (so a click finds the card not yet recorded), and the third
    call's record on it (the third `INSERT INTO approval_card`) until `release_joiner` is."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.release = threading.Event()
        self.release_joiner = threading.Event()
        self._read_done = threading.Event()
        self._watch = create_engine(engine.url, poolclass=NullPool)
        self._counts: dict[str, int] = {}
        self._lock = threading.Lock()

    def _nth(self, what: str) -> int:
        with self._lock:
            self._counts[what] = self._counts.get(what, 0) + 1
            return self._counts[what]

    def _asked(self, n: int) -> None:
        with self._watch.connect() as conn:
            for _ in range(200):
                if conn.execute(text("SELECT count(*) FROM approval")).scalar() == n:
                    return
                conn.rollback()
                self.release.wait(0.05)

    def executing(self, _conn: Any, _cursor: Any, statement: str, *_rest: Any) -> None:
        sql = statement.lstrip().upper()
        if sql.startswith("SELECT") and "APPROVAL.BATCH_ID =" in sql:
            if self._nth("read") == 1:
                self._asked(2)
        elif sql.startswith("INSERT INTO APPROVAL ("):
            if self._nth("ask") == 3:
                self._read_done.wait(10)
        elif sql.startswith("INSERT INTO APPROVAL_CARD"):
            nth = self._nth("record")
            if nth == 1:
                self.release.wait(30)
            elif nth == 3:
                self.release_joiner.wait(30)

    def executed(self, _conn: Any, _cursor: Any, statement: str, *_rest: Any) -> None:
        sql = statement.lstrip().upper()
        if sql.startswith("SELECT") and "APPROVAL.BATCH_ID =" in sql:
            self._read_done.set()

    def __enter__(self) -> JoinerHeld:
        event.listen(self.engine, "before_cursor_execute", self.executing)
        event.listen(self.engine, "after_cursor_execute", self.executed)
        return self

    def __exit__(self, *_exc: object) -> None:
        self.release.set()
        self.release_joiner.set()
        event.remove(self.engine, "before_cursor_execute", self.executing)
        event.remove(self.engine, "after_cursor_execute", self.executed)
        self._watch.dispose()


async def test_approve_all_never_decides_a_call_the_card_did_not_show(
    bot: SlackBot,  # noqa: F811
    fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
    db_rows: Any,
) -> None:
    """Clicked before the card is recorded, while a third call of the batch (asked after the
    post, on no card yet) is pending too: "all" is the two calls the card listed. (The old code
    took every call with no card yet as the card's, and decided the third once it joined.)"""
    engine = bot.app[RUNTIME_KEY].db.engine  # type: ignore[attr-defined]
    with JoinerHeld(engine) as held:
        fake_openai.script(*restarts(("api", "dev"), ("web", "dev"), ("db", "dev")))
        event_ = mention("restart them", user="U0DEV")
        root = event_["event"]["ts"]
        await bot.client.post("/slack/events", data=as_body(event_),
                              headers=signed_headers(as_body(event_)))  # fmt: skip
        card = await fake_slack.wait_for(
            lambda: (cards := approval_cards(fake_slack, root)) and len(call_ids(cards[0])) == 2
            and cards[0], 15,
        )  # fmt: skip
        shown = set(call_ids(card))
        await fake_slack.wait_for(lambda: len(db_rows(Approval)) == 3, 10)
        body = block_actions(card, APPROVE_ALL_ACTION, user="U0LEAD")
        response = await bot.client.post("/slack/events", data=body,
                                         headers=signed_headers(body))  # fmt: skip
        assert response.status == 200
        await asyncio.sleep(HOLD_S)  # the click waits for the card's record meanwhile
        held.release.set()
        for _ in range(60):  # the calls shown decided, the third still on no card
            if all(r.status != ApprovalStatus.PENDING for r in db_rows(Approval)
                   if r.id in shown):  # fmt: skip
                break
            await asyncio.sleep(0.05)
        held.release_joiner.set()  # the third call joins the card (recorded, then shown)
        await asyncio.sleep(1.0)  # a third call wrongly in "all" would be decided by now
    statuses = {r.id: r.status for r in db_rows(Approval)}
    [joined] = set(statuses) - shown
    assert {statuses[i] for i in shown} == {ApprovalStatus.APPROVED}
    assert statuses[joined] == ApprovalStatus.PENDING  # not on the card when it was clicked


async def test_a_feishu_click_before_the_record_is_answered_with_the_batch_card(
    feishu_bot: FeishuBot, fake_openai: FakeOpenAI, ops_api: OpsAPI, db_rows: Any
) -> None:
    """The posting process knows its card before the record lands, so it takes a click on it
    at once; the card it answers with (Feishu shows it in place of the clicked one) waits for
    that record: the batch's card, never the clicked call's alone (the other call's buttons
    would be gone)."""
    engine = feishu_bot.client.app[RUNTIME_KEY].db.engine  # type: ignore[index]
    with RecordHeld(engine) as held:
        card = await ask_feishu_batch(feishu_bot, fake_openai, ("api", "dev"), ("web", "dev"))
        assert await asyncio.to_thread(held.reached.wait, 10), "the record never started"
        rows = by_name(db_rows(Approval))
        fake = feishu_bot.fake
        click = asyncio.create_task(
            feishu_bot.send(
                fake.card_action(card.message_id, "approve", user="ou_lead",
                                 button_of=rows["api"].id)
            )
        )  # fmt: skip
        await asyncio.sleep(0.3)  # the click is taken meanwhile (its row waits on the record)
        held.release.set()
        _status, answer = await asyncio.wait_for(click, 15)
    assert answer["toast"]["type"] == "success"
    assert answer["card"]["data"]["header"]["title"]["content"] == "Approval needed: 2 calls"
    assert {name: r.status for name, r in by_name(db_rows(Approval)).items()} == {
        "api": ApprovalStatus.APPROVED, "web": ApprovalStatus.PENDING,
    }  # fmt: skip
