"""SQLModel tables, one module per domain; importing this package registers every one of them.

Conversations and runs (`runs`), approvals (`approvals`), the call log (`calls`), processed
events and the inbox (`inbox`), leases and run mail (`processes`), the console's items
(`console`), the audit's claimed report firings (`reports`) and the audit sinks' outbox
(`outbox`): every one in Alembic, whose environment imports this package for
`SQLModel.metadata`. `from bot.storage.models import X` works for every table and constant.

Nothing SQLite-only: the same code runs on PostgreSQL. Times are stored as aware UTC
(`DateTime(timezone=True)`); SQLite drops tzinfo, so reads go through `bot.clock.as_utc`.
SQLModel is synchronous: the queries live in `bot.storage.queries` and run through
`bot.storage.database.Database.run` (a worker thread).
"""

from __future__ import annotations

from bot.storage.models.approvals import (
    Approval,
    ApprovalCard,
    ApprovalDecision,
    ApprovalGrant,
    ApprovalReminder,
)
from bot.storage.models.calls import CALL_LOST, CALL_STARTED, OUTCOME_UNKNOWN, CallLog, CallStart
from bot.storage.models.console import ConsoleItem, ConsoleSequence, ConsoleThread
from bot.storage.models.credentials import OAuthLink, UserCredential
from bot.storage.models.ids import new_id
from bot.storage.models.inbox import InboxEvent, ProcessedEvent
from bot.storage.models.outbox import AuditOutbox, AuditSinkLease
from bot.storage.models.processes import BotProcess, RunMail
from bot.storage.models.reports import ScheduledReportRun
from bot.storage.models.runs import Conversation, Message, Run, RunFeedback
from bot.storage.models.triggers import TriggerAlert

__all__ = [
    "CALL_LOST",
    "CALL_STARTED",
    "OUTCOME_UNKNOWN",
    "Approval",
    "ApprovalCard",
    "ApprovalDecision",
    "ApprovalGrant",
    "ApprovalReminder",
    "AuditOutbox",
    "AuditSinkLease",
    "BotProcess",
    "CallLog",
    "CallStart",
    "ConsoleItem",
    "ConsoleSequence",
    "ConsoleThread",
    "Conversation",
    "InboxEvent",
    "Message",
    "OAuthLink",
    "ProcessedEvent",
    "Run",
    "RunFeedback",
    "RunMail",
    "ScheduledReportRun",
    "TriggerAlert",
    "UserCredential",
    "new_id",
]
