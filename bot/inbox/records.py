"""The inbox's records: what one row holds, and its payload as JSON.

A row's `kind` says which record its payload is: a message (`InboundMessage`), a click's
decision (`DecisionRecord`) or a rating (`FeedbackClick`). A payload is the record's own shape,
written and read by one pydantic `TypeAdapter` per kind, so a new field needs no codec.
Rows stored before the adapters (a rating's message as flat keys, a decision without its
platform, its grantees null) are brought to that shape on read (`_upgrade`): an acknowledged
event is never lost to a format change.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import TypeAdapter

from bot.chat.controls import FeedbackClick
from bot.chat.decisions import DecisionRecord
from bot.chat.threads import InboundMessage
from bot.clock import as_utc

Kind = Literal["message", "decision", "feedback"]
InboxItem = InboundMessage | DecisionRecord | FeedbackClick

_ADAPTERS: dict[Kind, TypeAdapter[Any]] = {
    "message": TypeAdapter(InboundMessage),
    "decision": TypeAdapter(DecisionRecord),
    "feedback": TypeAdapter(FeedbackClick),
}


@dataclass(frozen=True)
class InboxRecord:
    """One stored row as the workers see it: exactly one of message, decision or feedback."""

    id: int
    message: InboundMessage | None = None
    decision: DecisionRecord | None = None
    feedback: FeedbackClick | None = None
    accepted: float = 0.0  # time.monotonic() when this process stored it (0: an earlier one)

    @property
    def lane_key(self) -> str:
        """Messages are ordered per thread, ratings per person (a changed mind is applied
        after the first thought); decisions go through no lane."""
        if self.feedback is not None:
            return f"feedback/{self.feedback.platform}/{self.feedback.user_id}"
        assert self.message is not None
        t = self.message.thread
        return f"{t.platform}/{t.workspace}/{t.channel}/{t.root}"


def kind_of(item: InboxItem) -> Kind:
    match item:
        case InboundMessage():
            return "message"
        case DecisionRecord():
            return "decision"
        case FeedbackClick():
            return "feedback"


def payload_of(item: InboxItem) -> dict[str, Any]:
    """The row's JSON payload for a record."""
    payload: dict[str, Any] = _ADAPTERS[kind_of(item)].dump_python(item, mode="json")
    return payload


def record_from(
    inbox_id: int, kind: str, payload: dict[str, Any], *, accepted: float = 0.0
) -> InboxRecord:
    """A stored row's record (any row this inbox ever wrote; an unknown kind is a decision, as
    it always was). Raises `pydantic.ValidationError` on a payload no version wrote."""
    known: Kind = kind if kind in ("message", "feedback") else "decision"  # type: ignore[assignment]
    item = _ADAPTERS[known].validate_python(_upgrade(known, payload))
    match item:
        case InboundMessage():
            # aware UTC as the rest of the bot keeps it (pydantic attaches a tzinfo of its own)
            item = dataclasses.replace(item, received_at=as_utc(item.received_at))
            return InboxRecord(inbox_id, message=item, accepted=accepted)
        case FeedbackClick():
            return InboxRecord(inbox_id, feedback=item, accepted=accepted)
        case _:
            return InboxRecord(inbox_id, decision=item, accepted=accepted)


def _upgrade(kind: Kind, payload: dict[str, Any]) -> dict[str, Any]:
    """An older row's payload in today's shape (today's rows pass unchanged)."""
    data = dict(payload)
    if kind == "decision":
        data.setdefault("platform", "")
        if data.get("grantees") is None:
            data["grantees"] = []
    if kind == "feedback":
        data["run_id"] = data.get("run_id") or ""
        where = data.get("message")
        if isinstance(where, dict) and "thread" not in where:  # before: flat keys, no platform
            data["message"] = {
                "thread": {
                    "platform": data.get("platform"),
                    "workspace": where.get("workspace"),
                    "channel": where.get("channel"),
                    "root": where.get("root"),
                },
                "message_id": where.get("message_id"),
            }
    return data
