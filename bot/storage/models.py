"""SQLModel tables and queries: conversations, runs, approvals, the call log, processed events.

Nothing SQLite-only: the same code runs on PostgreSQL. Times are stored as aware UTC
(`DateTime(timezone=True)`); SQLite drops tzinfo, so reads go through `bot.clock.as_utc`.
SQLModel is synchronous: the queries live in `bot.storage.queries` and run through
`bot.storage.database.Database.run` (a worker thread).
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Column, DateTime, Index, Text, UniqueConstraint
from sqlmodel import Field, SQLModel

from bot.clock import utcnow

# a run's states: live (its task works on it, or waits for a human), then `answering` (the
# answer is stored and being posted); unfinished is either
LIVE_RUN_STATES = ("running", "waiting_approval")
UNFINISHED_RUN_STATES = (*LIVE_RUN_STATES, "answering")


def new_id() -> str:
    return uuid.uuid4().hex


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

    id: str = Field(default_factory=new_id, primary_key=True)
    conversation_id: int = Field(foreign_key="conversation.id", index=True)
    status: str = Field(
        default="running", index=True
    )  # running|waiting_approval|answering|done|failed|cancelled
    requester: str = ""
    query: str = Field(default="", sa_column=Column(Text, nullable=False))
    checkpoint: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))
    status_message_id: str | None = None
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


class Approval(SQLModel, table=True):
    """A request for a human decision on one exact tool call (bound by `fingerprint`).

    `requester` started the run; `requesters` are everyone whose messages the run had read when
    it made the call (four-eyes refuses each of them). `arguments` are what the card shows:
    known secrets masked, nothing else hidden. `grant_fingerprint` is set only when the policy
    allows "approve for this thread" (one approver, self-approval allowed): what a grant from
    this approval would cover, for `grant_ttl_s` seconds. `card_platform` is where the card is
    posted (known from the start: decisions from any other platform are refused).
    """

    __table_args__ = (UniqueConstraint("run_id", "tool_call_id"),)

    id: str = Field(default_factory=new_id, primary_key=True)
    run_id: str = Field(foreign_key="run.id", index=True)
    conversation_id: int = Field(foreign_key="conversation.id", index=True)
    tool_call_id: str
    tool_name: str
    connector: str = ""
    action: str = ""
    arguments: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    fingerprint: str
    reason: str = Field(default="", sa_column=Column(Text, nullable=False))
    risk: str = "medium"
    requester: str = ""
    requesters: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    approvers: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    min_approvals: int = 1
    allow_self_approval: bool = True
    grant_fingerprint: str = ""
    grant_ttl_s: float = 0.0
    grant_vary: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    status: str = Field(
        default="pending", index=True
    )  # pending|approved|rejected|expired|cancelled
    decided_by: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    decision_reason: str = Field(default="", sa_column=Column(Text, nullable=False))
    thread_grant: bool = False
    card_platform: str | None = None
    card_workspace: str | None = None
    card_channel: str | None = None
    card_root: str | None = None
    card_message_id: str | None = None
    escalated: bool = False
    policy_rule: str = ""  # the manifest rule that set this policy ('' = the static one)
    policy_reason: str = Field(default="", sa_column=Column(Text, nullable=False))
    on_timeout: str = "expire"  # expire | reject: what nobody deciding in time means
    route: str = "thread"  # thread | channel:<id> | dm: where the card's copies went
    # the escalation ladder [{after_s, approvers, notify}], counted from `created_at`, and how
    # many of its tiers were applied (their approvers are in `approvers` from then on)
    escalate: list[dict[str, Any]] = Field(
        default_factory=list, sa_column=Column(JSON, nullable=False)
    )
    escalation_level: int = 0
    created_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(DateTime(timezone=True), nullable=False)
    )
    expires_at: datetime = Field(sa_column=Column(DateTime(timezone=True), nullable=False))
    decided_at: datetime | None = Field(
        default=None, sa_column=Column(DateTime(timezone=True), nullable=True)
    )


class ApprovalCard(SQLModel, table=True):
    """One copy of an approval's card (the thread's, an approvals channel's, one per DM): where
    it lives, so a click on any copy is recognised and the decision edits every copy, also
    after a restart. `link` is the originating thread's link the copy shows."""

    __tablename__ = "approval_card"
    __table_args__ = (UniqueConstraint("approval_id", "platform", "channel", "message_id"),)

    id: int | None = Field(default=None, primary_key=True)
    approval_id: str = Field(foreign_key="approval.id", index=True)
    platform: str
    workspace: str = ""
    channel: str = ""
    root: str = ""
    message_id: str
    kind: str = "thread"  # thread | channel | dm
    user_id: str = ""  # a DM copy's recipient
    link: str = Field(default="", sa_column=Column(Text, nullable=False))
    created_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(DateTime(timezone=True), nullable=False)
    )


class ApprovalDecision(SQLModel, table=True):
    """One person's answer to one approval; unique per person, so a double click counts once."""

    __table_args__ = (UniqueConstraint("approval_id", "user_id"),)

    id: int | None = Field(default=None, primary_key=True)
    approval_id: str = Field(foreign_key="approval.id", index=True)
    user_id: str
    decision: str  # approve | reject
    reason: str = Field(default="", sa_column=Column(Text, nullable=False))
    decided_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(DateTime(timezone=True), nullable=False)
    )


class ApprovalGrant(SQLModel, table=True):
    """ "Approve for this thread": in this conversation, until `expires_at`, a call of `tool_name`
    whose scope fingerprint (the arguments minus the manifest's `grant_scope.vary` keys) is
    `fingerprint` runs without a card, when every requester of the call is a grantee."""

    __tablename__ = "approval_grant"
    __table_args__ = (Index("ix_approval_grant_conversation_tool", "conversation_id", "tool_name"),)

    id: str = Field(default_factory=new_id, primary_key=True)
    conversation_id: int = Field(foreign_key="conversation.id")
    tool_name: str
    fingerprint: str
    grantees: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    granted_by: str
    approval_id: str = Field(foreign_key="approval.id")
    created_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(DateTime(timezone=True), nullable=False)
    )
    expires_at: datetime = Field(sa_column=Column(DateTime(timezone=True), nullable=False))


CALL_STARTED = "started"  # result_status of a row written ahead of its call, not yet completed
OUTCOME_UNKNOWN = "outcome unknown (started, never completed: the bot stopped during the call)"


class CallLog(SQLModel, table=True):
    """Write-ahead: one row per tool call attempt, executed, failed, blocked or rejected.

    A call that goes out is inserted as `started` before it does and completed after; a row
    still `started` after its run ended is a call whose outcome is unknown.
    `approval_status`: not_required | approved | rejected | expired | cancelled | thread_grant
    (then `grant_id` names the grant and `approvers` who granted it) | denied (a manifest rule
    blocked it; `policy_rule` names the rule).
    `result_status`: started | ok | error | blocked | rejected | expired.
    `requester` started the run; `requesters` are everyone whose messages it had read at the call.
    """

    __tablename__ = "call_log"
    __table_args__ = (
        Index("ix_call_log_at", "at"),
        Index("ix_call_log_connector_action", "connector", "action"),
        Index("ix_call_log_run_call", "run_id", "tool_call_id"),
    )

    id: int | None = Field(default=None, primary_key=True)
    at: datetime = Field(
        default_factory=utcnow, sa_column=Column(DateTime(timezone=True), nullable=False)
    )
    conversation_id: int | None = None
    run_id: str = ""
    tool_call_id: str = ""
    platform: str = ""
    channel: str = ""
    direct: bool = False
    requester: str = ""
    requesters: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    connector: str = ""
    action: str = ""
    tool_name: str = ""
    mutating: bool = False
    arguments: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    fingerprint: str = ""
    approval_id: str | None = None
    approval_status: str = "not_required"
    policy_rule: str = ""  # the manifest rule that decided the policy ('' = the static one)
    grant_id: str | None = None
    approvers: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    result_status: str = "ok"
    observation: str = Field(default="", sa_column=Column(Text, nullable=False))
    duration_ms: float = 0.0
    error: str | None = Field(default=None, sa_column=Column(Text))


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
