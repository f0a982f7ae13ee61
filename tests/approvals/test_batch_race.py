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
from tests.approvals.test_batches_slack import ask_batch, bot, by_name, settings  # noqa: F401
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.ops_api import OpsAPI
from tests.fakes.slack_api import FakeSlack
from tests.slack.e2e import SlackBot
from tests.slack.payloads import block_actions, signed_headers

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
