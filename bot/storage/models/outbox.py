"""The audit outbox: each call-log and approval event waiting to go out to one configured sink.

A row is written in the transaction that writes the call-log or approval row it reports, so an
event is never lost and never reported for a change that was rolled back; a background sender
(`bot.audit.sinks.sender`) ships the rows and deletes them once the sink took them. The
sender's order and its exactly-once delivery across processes come from `AuditSinkLease`: one
process at a time sends for a sink.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Column, DateTime, Index, Text
from sqlmodel import Field, SQLModel

from bot.clock import utcnow


class AuditOutbox(SQLModel, table=True):
    """One event for one sink. `event_uid` names the event (the same in every sink's row: a
    receiver that saw it already can tell); `snapshot` is what the event is built from: the
    redacted row's fields the event carries, never the arguments or the tool's output."""

    __tablename__ = "audit_outbox"
    __table_args__ = (Index("ix_audit_outbox_sink_id", "sink", "id"),)

    id: int | None = Field(default=None, primary_key=True)
    sink: str
    event_uid: str
    kind: str  # call | approval
    at: datetime = Field(
        default_factory=utcnow, sa_column=Column(DateTime(timezone=True), nullable=False)
    )
    snapshot: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    attempts: int = 0
    last_error: str = Field(default="", sa_column=Column(Text, nullable=False))


class AuditSinkLease(SQLModel, table=True):
    """Who sends for a sink, until when (by the database's clock): the one sender per sink."""

    __tablename__ = "audit_sink_lease"

    sink: str = Field(primary_key=True)
    holder: str = ""
    until: datetime = Field(sa_column=Column(DateTime(timezone=True), nullable=False))
