"""Call log tables: the write-ahead row of each tool call attempt, and each call's one start.

The database itself refuses a second start of the same call (`CallStart`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Column, DateTime, Index, Text
from sqlmodel import Field, SQLModel

from bot.clock import utcnow

CALL_STARTED = "started"  # result_status of a row written ahead of its call, not yet completed
# result_status of a call refused because this process no longer held its run (another took
# it over): never run; the adopter's resumed run does not replay it as its own attempt
CALL_LOST = "lost"
OUTCOME_UNKNOWN = "outcome unknown (started, never completed: the bot stopped during the call)"


class CallLog(SQLModel, table=True):
    """Write-ahead: one row per tool call attempt, executed, failed, blocked or rejected.

    A call that goes out is inserted as `started` before it does and completed after; a row
    still `started` after its run ended is a call whose outcome is unknown.
    `approval_status`: not_required | approved | rejected | expired | cancelled | thread_grant
    (then `grant_id` names the grant and `approvers` who granted it) | denied (a manifest rule
    blocked it; `policy_rule` names the rule).
    `result_status`: started | ok | error | blocked | rejected | expired | lost (refused: the
    process no longer held the run).
    `requester` started the run; `requesters` are everyone whose messages it had read at the call.
    `arguments` are what ran; when an approver edited the call first, `model_arguments` are the
    model's (else None) and `edited_by` names the approver.
    """

    __tablename__ = "call_log"
    __table_args__ = (
        Index("ix_call_log_at", "at"),
        Index("ix_call_log_connector_action", "connector", "action"),
        Index("ix_call_log_run_call", "run_id", "tool_call_id"),
        # covering indexes for the audit report, so it reads no row it does not list: grouped
        # counts (approvals by rule too, 0016) and top errors scan them in GROUP BY order,
        # percentiles walk durations in order. Only two: each costs every insert a little.
        Index(
            "ix_audit_call_log_summary",
            "connector",
            "action",
            "requester",
            "policy_rule",
            "at",
            "result_status",
            "approval_status",
            "mutating",
            "error",
        ),
        Index(
            "ix_audit_call_log_durations",
            "connector",
            "action",
            "duration_ms",
            "at",
            "result_status",
        ),
    )

    id: int | None = Field(default=None, primary_key=True)
    at: datetime = Field(
        default_factory=utcnow, sa_column=Column(DateTime(timezone=True), nullable=False)
    )
    conversation_id: int | None = None
    run_id: str = ""
    tool_call_id: str = ""
    platform: str = ""
    workspace: str = ""  # the Slack team or Feishu tenant: audits filter by it
    channel: str = ""
    direct: bool = False
    requester: str = ""
    requesters: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    connector: str = ""
    action: str = ""
    tool_name: str = ""
    mutating: bool = False
    arguments: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    model_arguments: dict[str, Any] | None = Field(
        default=None, sa_column=Column(JSON, nullable=True)
    )
    edited_by: str = ""
    fingerprint: str = ""
    approval_id: str | None = None
    approval_status: str = "not_required"
    policy_rule: str = ""  # the manifest rule that decided the policy ('' = the static one)
    grant_id: str | None = None
    approvers: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    # what the approver wrote with their decision (approve or reject), '' when nothing
    approval_comment: str = Field(default="", sa_column=Column(Text, nullable=False))
    # whose credentials the call used: `platform:workspace:user` (per-user OAuth), `bot`, or ''
    # (a connector with one shared credential); never the token
    credential_owner: str = Field(default="", sa_column=Column(Text, nullable=False,
                                                               server_default=""))  # fmt: skip
    result_status: str = "ok"
    observation: str = Field(default="", sa_column=Column(Text, nullable=False))
    duration_ms: float = 0.0
    error: str | None = Field(default=None, sa_column=Column(Text))


class CallStart(SQLModel, table=True):
    """One row per tool call that went out: (run, tool call id) is its key, so a second start
    of the same call (a process that lost the run and was not told, a missed check) fails in
    the database. Blocked, rejected and id-less attempts have no row here."""

    __tablename__ = "call_start"

    run_id: str = Field(primary_key=True)
    tool_call_id: str = Field(primary_key=True)
    call_log_id: int
