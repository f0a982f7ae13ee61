"""The inbox's rows decode with one TypeAdapter per kind, rows written before them included.

The payloads below are literally what the inbox stored before `bot.inbox.records` (the
hand-written codecs of `runs/inbox.py` and `runs/feedback.py`, and the older rows those codecs
still read): an event acknowledged by an older process must be processed by this one.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import ValidationError

from bot.chat.controls import FeedbackClick
from bot.chat.decisions import CardClick, DecisionRecord, DecisionResult
from bot.chat.threads import InboundMessage, MessageRef, ThreadRef
from bot.inbox.inbox import Inbox
from bot.inbox.records import InboxItem, payload_of, record_from
from bot.storage import queries
from bot.storage.database import Database
from bot.storage.models import InboxEvent

THREAD = ThreadRef("slack", "T1", "C1", "1700000000.000100")
AT = datetime(2026, 11, 30, 9, 15, 30, 123456, tzinfo=UTC)

# as `message_payload` wrote it
OLD_MESSAGE = {
    "thread": {"platform": "slack", "workspace": "T1", "channel": "C1", "root": THREAD.root},
    "event_id": "Ev1",
    "user_id": "U1",
    "text": "restart api",
    "message_id": "1700000000.000200",
    "mentions_bot": True,
    "direct": False,
    "received_at": "2026-11-30T09:15:30.123456+00:00",
}
# as `decision_payload` wrote it
OLD_DECISION = {
    "platform": "slack",
    "approval_id": "a1",
    "user_id": "U2",
    "decision": "approve_thread",
    "reason": "fine",
    "grantees": ["U1"],
    "reply_to": {"platform": "slack", "workspace": "T1", "channel": "C1", "root": THREAD.root},
    "card": {
        "platform": "slack", "workspace": "T1", "channel": "C1",
        "message_id": "1700000000.000300", "external": False,
    },
}  # fmt: skip
# as `feedback_payload` wrote it: the answer message as flat keys, its platform the row's
OLD_FEEDBACK = {
    "platform": "slack",
    "user_id": "U1",
    "rating": "down",
    "run_id": "",
    "message": {"workspace": "T1", "channel": "C1", "root": THREAD.root, "message_id": "m9"},
}
# the older rows the old codecs still read: no platform, no reason, grantees null, no card;
# a message without `direct`; a console rating with run_id null
OLDER_DECISION = {"approval_id": "a2", "user_id": "U3", "decision": "reject", "grantees": None}
OLDER_MESSAGE = {k: v for k, v in OLD_MESSAGE.items() if k != "direct"}
OLDER_FEEDBACK = {"platform": "console", "user_id": "U1", "rating": "up", "run_id": None}


def test_old_rows_decode_to_the_records_they_stored() -> None:
    message = record_from(1, "message", OLD_MESSAGE).message
    assert message == InboundMessage(
        thread=THREAD, event_id="Ev1", user_id="U1", text="restart api",
        message_id="1700000000.000200", mentions_bot=True, direct=False, received_at=AT,
    )  # fmt: skip
    assert message is not None and message.received_at.tzinfo is UTC
    assert record_from(2, "decision", OLD_DECISION).decision == DecisionRecord(
        platform="slack", approval_id="a1", user_id="U2", decision="approve_thread",
        reason="fine", grantees=("U1",), reply_to=THREAD,
        card=CardClick(platform="slack", workspace="T1", channel="C1",
                       message_id="1700000000.000300"),
    )  # fmt: skip
    assert record_from(3, "feedback", OLD_FEEDBACK).feedback == FeedbackClick(
        platform="slack", user_id="U1", rating="down", message=MessageRef(THREAD, "m9")
    )


def test_older_rows_decode_with_the_defaults_the_old_codecs_gave() -> None:
    assert record_from(4, "decision", OLDER_DECISION).decision == DecisionRecord(
        platform="", approval_id="a2", user_id="U3", decision="reject"
    )
    message = record_from(5, "message", OLDER_MESSAGE).message
    assert message is not None and message.direct is False
    assert record_from(6, "feedback", OLDER_FEEDBACK).feedback == FeedbackClick(
        platform="console", user_id="U1", rating="up", run_id=""
    )


ITEMS: list[InboxItem] = [
    InboundMessage(
        thread=THREAD, event_id="Ev2", user_id="U1", text="hi", direct=True, received_at=AT
    ),
    DecisionRecord(platform="feishu", approval_id="a3", user_id="ou_1", decision="approve"),
    DecisionRecord(
        platform="slack",
        approval_id="a1",
        user_id="U2",
        decision="approve_thread",
        grantees=("U1", "U4"),
        reply_to=THREAD,
        card=CardClick(
            platform="slack", workspace="T1", channel="C1", message_id="m2", external=True
        ),
    ),  # fmt: skip
    FeedbackClick(platform="slack", user_id="U1", rating="up", message=MessageRef(THREAD, "m1")),
    FeedbackClick(platform="console", user_id="U1", rating="down", run_id="r1"),
]


@pytest.mark.parametrize("item", ITEMS, ids=lambda item: type(item).__name__)
def test_a_record_round_trips_through_its_json_payload(item: InboxItem) -> None:
    kind = {InboundMessage: "message", DecisionRecord: "decision", FeedbackClick: "feedback"}
    record = record_from(7, kind[type(item)], payload_of(item))
    assert item in (record.message, record.decision, record.feedback)


def test_a_payload_no_version_wrote_is_refused() -> None:
    with pytest.raises(ValidationError):
        record_from(8, "decision", {**OLD_DECISION, "decision": "maybe"})
    with pytest.raises(ValidationError):
        record_from(9, "message", {k: v for k, v in OLD_MESSAGE.items() if k != "thread"})


async def test_old_rows_left_by_a_gone_process_are_processed(inbox_db: Database) -> None:
    """Rows in the old format, stored by a process that is gone, are adopted and handled."""
    for kind, payload in (
        ("message", OLD_MESSAGE), ("decision", OLD_DECISION), ("feedback", OLD_FEEDBACK),
    ):  # fmt: skip
        row = InboxEvent(platform="slack", kind=kind, payload=payload, received_at=AT, owner="gone")
        await inbox_db.run(queries.add_inbox_events, [(row, "")])
    seen: list[Any] = []

    async def dispatch(message: InboundMessage, inbox_id: int) -> None:
        seen.append(message)
        await inbox.done(inbox_id)

    async def decide(record: DecisionRecord) -> DecisionResult:
        seen.append(record)
        return DecisionResult("decided", "ok")

    async def feedback(click: FeedbackClick) -> None:
        seen.append(click)

    async def claim(dead: set[str]) -> list[InboxEvent]:
        assert dead == {"gone"}
        return await inbox_db.run(queries.inbox_events)

    inbox = Inbox(
        inbox_db, dispatch=dispatch, decide=decide, feedback=feedback, owner="me",
        claim_orphans=claim,
    )  # fmt: skip
    try:
        assert await inbox.adopt({"gone"}) == 3
        await inbox.wait_idle(10)
    finally:
        await inbox.close()
    assert sorted(type(s).__name__ for s in seen) == [
        "DecisionRecord", "FeedbackClick", "InboundMessage",
    ]  # fmt: skip
    assert await inbox_db.run(queries.inbox_events) == []
