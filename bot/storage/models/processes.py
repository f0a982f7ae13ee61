"""Multi-process tables: the live `chatops serve` processes, and replies for another's runs.

Several processes share one database: each holds a lease (`BotProcess`), and a reply for a run
another process owns waits for it as mail (`RunMail`).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Column, DateTime, Text
from sqlmodel import Field, SQLModel

from bot.clock import utcnow


class BotProcess(SQLModel, table=True):
    """A live `chatops serve` process: `id` is host:pid:start, `lease_until` renewed by its
    heartbeat. A process whose lease lapsed (or, on this host, whose pid is gone) is dead:
    its runs and unprocessed inbox events are taken over."""

    __tablename__ = "bot_process"

    id: str = Field(primary_key=True)
    host: str
    pid: int
    started_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(DateTime(timezone=True), nullable=False)
    )
    lease_until: datetime = Field(sa_column=Column(DateTime(timezone=True), nullable=False))


class RunMail(SQLModel, table=True):
    """A thread reply for a run another process owns: the owner takes it (once: `taken_by`
    set by a conditional UPDATE) as an interrupt, or, if the run ended first, as the next
    run's request."""

    __tablename__ = "run_mail"

    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(index=True)
    message_id: int
    author: str = ""
    text: str = Field(default="", sa_column=Column(Text, nullable=False))
    taken_by: str | None = None
    created_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(DateTime(timezone=True), nullable=False)
    )
