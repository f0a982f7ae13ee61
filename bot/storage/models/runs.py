"""Conversation and run tables: threads, their messages, agent runs and answer feedback.

A run carries its engine checkpoint, its lease (`bot.runs.leases`) and its fencing epoch.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Column, DateTime, Index, Integer, Text, UniqueConstraint
from sqlmodel import Field, SQLModel

from bot.clock import utcnow
from bot.statuses import RunStatus
from bot.storage.columns import StatusText
from bot.storage.models.ids import new_id


class Conversation(SQLModel, table=True):
    """A thread: (platform, workspace, channel, root) is unique."""

    __table_args__ = (UniqueConstraint("platform", "workspace", "channel", "root"),)

    id: int | None = Field(default=None, primary_key=True)
    platform: str
    workspace: str
    channel: str
    root: str
    direct: bool = False  # a direct message: only its one user sees what is posted there
    created_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(DateTime(timezone=True), nullable=False)
    )


class Message(SQLModel, table=True):
    """One message of a thread; `pinned` ones (interrupts) survive context compaction."""

    id: int | None = Field(default=None, primary_key=True)
    conversation_id: int = Field(foreign_key="conversation.id", index=True)
    role: str = "user"  # user | assistant
    author: str = ""
    text: str = Field(sa_column=Column(Text, nullable=False))
    platform_id: str | None = None
    pinned: bool = False
    created_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(DateTime(timezone=True), nullable=False)
    )


class Run(SQLModel, table=True):
    """One agent run in a conversation; `checkpoint` is the engine state after each iteration."""

    # the audit's runs by outcome: a window of runs by status, read from the index alone
    __table_args__ = (Index("ix_run_started_at_status", "started_at", "status"),)

    id: str = Field(default_factory=new_id, primary_key=True)
    conversation_id: int = Field(foreign_key="conversation.id", index=True)
    status: RunStatus = Field(default=RunStatus.RUNNING, index=True, sa_type=StatusText(RunStatus))
    requester: str = ""
    query: str = Field(default="", sa_column=Column(Text, nullable=False))
    checkpoint: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))
    # the only connectors the run may use (a trigger's `connectors:`); None: every one
    connectors: list[str] | None = Field(default=None, sa_column=Column(JSON))
    status_message_id: str | None = None
    # the thread message that asked for the run (`Message.id`): an adopted run that never
    # checkpointed starts again with the history before it (NULL on runs of older versions)
    request_message_id: int | None = None
    # the message carrying the answer's feedback buttons: a click is tied to it, never to a
    # run id the button carried
    answer_message_id: str | None = None
    answer: str | None = Field(default=None, sa_column=Column(Text))
    error: str | None = Field(default=None, sa_column=Column(Text))
    iterations: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    started_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(DateTime(timezone=True), nullable=False)
    )
    finished_at: datetime | None = Field(
        default=None, sa_column=Column(DateTime(timezone=True), nullable=True)
    )
    # who pressed Stop (set before the click is acknowledged): a stopped run is never resumed
    stopped_by: str | None = None
    # the lease: the process that advances the run (`BotProcess.id`) and until when; renewed
    # by its heartbeat, taken over by another process once it lapses (`bot.runs.leases`)
    owner: str | None = Field(default=None, index=True)
    lease_until: datetime | None = Field(
        default=None, sa_column=Column(DateTime(timezone=True), nullable=True)
    )
    # the fencing token: raised by every adoption, so a process that lost the run (and does
    # not know it yet) holds a stale epoch and can neither start a tool call nor write the run
    lease_epoch: int = Field(
        default=0, sa_column=Column(Integer, nullable=False, server_default="0")
    )
    # the W3C `traceparent` of the run's first "run" span (tracing on): a run resumed or adopted
    # continues that trace (`bot.observability.tracing`)
    trace_parent: str | None = None


class RunFeedback(SQLModel, table=True):
    """One person's thumbs up or down on a run's answer; changeable (one row per person)."""

    __tablename__ = "run_feedback"
    __table_args__ = (UniqueConstraint("run_id", "user_id"),)

    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(foreign_key="run.id", index=True)
    platform: str
    user_id: str
    rating: str  # up | down
    created_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(DateTime(timezone=True), nullable=False)
    )
    updated_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(DateTime(timezone=True), nullable=False)
    )
