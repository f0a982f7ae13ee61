"""Approval tables: each request for a decision, its card copies, answers and thread grants.

The request is bound to one exact tool call; "approve for this thread" grants cover later calls
(`bot.approvals.grants`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Column, DateTime, Index, Text, UniqueConstraint
from sqlmodel import Field, SQLModel

from bot.clock import utcnow
from bot.statuses import ApprovalStatus
from bot.storage.columns import StatusText
from bot.storage.models.ids import new_id


class Approval(SQLModel, table=True):
    """A request for a human decision on one exact tool call (bound by `fingerprint`).

    `requester` started the run; `requesters` are everyone whose messages the run had read when
    it made the call (four-eyes refuses each of them). `arguments` are what the card shows:
    known secrets masked, nothing else hidden. `grant_fingerprint` is set only when the policy
    allows "approve for this thread" (one approver, self-approval allowed): what a grant from
    this approval would cover, for `grant_ttl_s` seconds. `card_platform` is where the card is
    posted (known from the start: decisions from any other platform are refused).
    An approver may edit the call before approving it: `arguments` and `fingerprint` are then
    the edited call's (what runs, what a quorum's approvals count for), `model_arguments` and
    `model_fingerprint` the call the model made (empty while nobody edited), `edited_by` who
    edited last.
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
    status: ApprovalStatus = Field(
        default=ApprovalStatus.PENDING, index=True, sa_type=StatusText(ApprovalStatus)
    )
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
    model_arguments: dict[str, Any] | None = Field(
        default=None, sa_column=Column(JSON, nullable=True)
    )
    model_fingerprint: str = ""
    edited_by: str = ""
    # the calls of one model response that need approval share a batch (run id + step): one
    # card lists them all; each keeps this row, its fingerprint, quorum and log entry ('' = alone)
    batch_id: str = Field(default="", index=True)
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
    """One person's answer to one approval; unique per person, so a double click counts once.
    `fingerprint`: the arguments an approval was given for; a quorum counts only the approvals
    of the call as it stands (an edit resets the tally; an approver approves again, the same
    row then names the edited call)."""

    __table_args__ = (
        UniqueConstraint("approval_id", "user_id"),
        # the audit's `--user`: decisions by user, read from the index alone
        Index("ix_audit_approval_decision_user", "user_id", "approval_id"),
    )

    id: int | None = Field(default=None, primary_key=True)
    approval_id: str = Field(foreign_key="approval.id", index=True)
    user_id: str
    decision: str  # approve | reject | request_changes
    reason: str = Field(default="", sa_column=Column(Text, nullable=False))
    fingerprint: str = ""
    decided_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(DateTime(timezone=True), nullable=False)
    )


class ApprovalReminder(SQLModel, table=True):
    """The one reminder an approver gets about an approval, claimed before it is sent: the
    unique (approval, user) pair is the claim, so after a restart or on another process sharing
    the database nobody is reminded twice (`bot.approvals.reminders`)."""

    __tablename__ = "approval_reminder"
    __table_args__ = (UniqueConstraint("approval_id", "user_id"),)

    id: int | None = Field(default=None, primary_key=True)
    approval_id: str = Field(foreign_key="approval.id", index=True)
    user_id: str
    claimed_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(DateTime(timezone=True), nullable=False)
    )


class ApprovalGrant(SQLModel, table=True):
    """ "Approve for this thread": in this conversation, until `expires_at`, a call of `tool_name`
    whose scope fingerprint (the arguments minus the manifest's `grant_scope.vary` keys) is
    `fingerprint` runs without a card, when every requester of the call is a grantee, and only
    while the call's policy, evaluated now, resolves to `policy_rule` and lets `granted_by`
    approve (`bot.approvals.grants`). `policy_rule` None: a grant that records no rule (written
    before grants were bound to their rule): it covers nothing. `approvers`: who the rule named
    when the grant was made (as the approval row had them), for the record."""

    __tablename__ = "approval_grant"
    __table_args__ = (Index("ix_approval_grant_conversation_tool", "conversation_id", "tool_name"),)

    id: str = Field(default_factory=new_id, primary_key=True)
    conversation_id: int = Field(foreign_key="conversation.id")
    tool_name: str
    fingerprint: str
    grantees: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    granted_by: str
    approval_id: str = Field(foreign_key="approval.id")
    policy_rule: str | None = None  # the rule that decided the granted call ('' = static)
    approvers: list[str] | None = Field(default=None, sa_column=Column(JSON, nullable=True))
    created_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(DateTime(timezone=True), nullable=False)
    )
    expires_at: datetime = Field(sa_column=Column(DateTime(timezone=True), nullable=False))
