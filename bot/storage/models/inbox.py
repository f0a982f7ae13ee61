"""Inbound event tables: event ids already handled (dedupe), and the inbox not yet processed.

Both are written before the platform gets its 200, so a crash in between loses nothing.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Column, DateTime, Index
from sqlmodel import Field, SQLModel

from bot.clock import utcnow


class ProcessedEvent(SQLModel, table=True):
    """Platform event ids already handled (Slack retries, Feishu re-pushes); rows older than
    the platforms' retry window are pruned (`RunManager`), so the table stays small."""

    __tablename__ = "processed_event"
    __table_args__ = (Index("ix_processed_event_created_at", "created_at"),)

    event_id: str = Field(primary_key=True)
    platform: str = ""
    created_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(DateTime(timezone=True), nullable=False)
    )


class InboxEvent(SQLModel, table=True):
    """An acknowledged inbound event not processed yet: written (with its `processed_event`
    dedupe row) before the platform gets its 200, deleted when processed, so a crash in
    between loses nothing: start-up processes what is left. `kind` is message | decision |
    feedback."""

    __tablename__ = "inbox_event"

    id: int | None = Field(default=None, primary_key=True)
    platform: str
    kind: str
    payload: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    received_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(DateTime(timezone=True), nullable=False)
    )
    # the process that acknowledged it and processes it; another takes it over only once that
    # process is gone (`bot.runs.leases`)
    owner: str | None = None
