"""Web console tables: its threads, the items shown in them, and the counter ordering changes."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Boolean, Column, DateTime, Index, Text, false
from sqlmodel import Field, SQLModel

from bot.clock import utcnow


class ConsoleThread(SQLModel, table=True):
    """A web console conversation as its sidebar lists it: the title (its first message), the
    state of its latest run, how many of its approvals wait, and `seq`, the console event id of
    its latest change (newest first). Kept with its items by `bot.storage.console.save_item`."""

    __tablename__ = "console_thread"

    root: str = Field(primary_key=True)
    title: str = Field(default="", sa_column=Column(Text, nullable=False))
    state: str = ""
    pending: int = 0
    seq: int = Field(default=0, index=True)
    # "deleted" in the console: no longer listed or opened; its items, runs and call-log
    # rows stay (the audit trail is not the console's to erase)
    hidden: bool = Field(default=False, sa_column=Column(Boolean, nullable=False,
                                                         server_default=false()))  # fmt: skip
    created_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(DateTime(timezone=True), nullable=False)
    )
    updated_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(DateTime(timezone=True), nullable=False)
    )


class ConsoleItem(SQLModel, table=True):
    """One thing shown in a console thread, in its latest state: a user's message, a status
    message, an approval card, an answer or a notice (`data`: what the page renders).

    `seq` is the console's event id: every change moves the item to the next value of
    `console_sequence`, so "everything since event N" is `seq > N` (what `Last-Event-ID`
    replays). `position` is the seq it was created at: its place in the thread, for good.
    """

    __tablename__ = "console_item"
    __table_args__ = (
        Index("ix_console_item_root_position", "root", "position"),
        Index("ix_console_item_kind_state", "kind", "state"),
    )

    id: str = Field(primary_key=True)
    root: str
    kind: str  # message | status | approval | answer | notice
    state: str = ""  # a status's run state, an approval's state
    data: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    seq: int = Field(index=True, unique=True)
    position: int
    created_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(DateTime(timezone=True), nullable=False)
    )
    updated_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(DateTime(timezone=True), nullable=False)
    )


class ConsoleSequence(SQLModel, table=True):
    """The console's event counter: one row, incremented in the transaction that changes an
    item. The row lock makes writers take numbers in commit order, without gaps, in every
    process sharing the database: a reader that saw event N has seen every event before it."""

    __tablename__ = "console_sequence"

    id: int = Field(default=1, primary_key=True)
    value: int = 0
