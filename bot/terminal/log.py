"""`chatops chat` keeps the same records as `chatops serve`: the call log and the approvals.

The terminal conversation is stored like a chat thread (platform `terminal`, the machine as the
workspace, the OS user as the channel, a direct conversation: only that user sees it), the run
under it, every tool call attempt in the write-ahead call log (malformed ones included), and
every approval asked at the terminal (or answered up front with `--approve`) as an approval row
decided by the OS user, so `chatops audit` shows who ran what from a terminal, and who said yes.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.exc import ArgumentError, SQLAlchemyError

from bot.clock import utcnow
from bot.config import Settings
from bot.engine.hooks import HookRegistry, PreToolUseContext, RunContext
from bot.engine.notes import ApprovalNote
from bot.errors import ChatopsError
from bot.redaction import mask_known
from bot.storage import approvals as approval_queries
from bot.storage import queries as queries
from bot.storage.database import (
    Database,
    create_db_engine,
    db_error_reason,
    init_schema,
    safe_database_url,
)
from bot.storage.models import ApprovalDecision, Conversation, Run
from hooks.approval_gate import CALL_START_PRIORITY
from hooks.call_log import CallLogHook, CallStartHook
from hooks.guards import ReadOnlyGuard, TruncateResultGuard

PLATFORM = "terminal"
GATE_PRIORITY = 50  # where the server's approval gate sits


class TerminalLogError(ChatopsError):
    """The database cannot be opened; the message names it (password hidden) and why."""


class TerminalLog:
    """The database of one `chatops chat`: open it, start the run, record, finish, close."""

    def __init__(self, engine: Engine, *, user: str) -> None:
        self.engine = engine
        self.db = Database(engine)
        self.user = user
        self.run: Run | None = None
        self.conversation: Conversation | None = None

    @classmethod
    async def open(cls, settings: Settings, *, user: str) -> TerminalLog:
        """`DATABASE_URL`, migrated to the newest schema like `chatops serve` does."""
        url = settings.database_url
        try:
            engine = create_db_engine(url)
            await asyncio.to_thread(init_schema, engine)
        except (ArgumentError, ImportError, SQLAlchemyError) as exc:
            raise TerminalLogError(
                f"cannot open the database {safe_database_url(url)} (DATABASE_URL), where "
                f"chatops chat keeps its call log: {db_error_reason(exc)}"
            ) from None
        return cls(engine, user=user)

    async def start(self, request: str) -> RunContext[None]:
        """The conversation and run rows; the context every hook of this run sees."""
        run = queries.new_run(conversation_id=0, requester=self.user, query=request)
        key = (PLATFORM, socket.gethostname(), self.user, run.id)
        conv = await self.db.run(queries.get_or_create_conversation, *key, direct=True)
        run.conversation_id = conv.id or 0
        self.run = await self.db.run(queries.add_run, run)
        self.conversation = conv
        return RunContext(
            run_id=run.id,
            requester=self.user,
            conversation_id=conv.id,
            platform=PLATFORM,
            channel=self.user,
            direct=True,
        )

    def install(self, hooks: HookRegistry, approval: Any, settings: Settings, *, name: str) -> None:
        """The terminal's approval hook where the server's gate sits, the server's guards, and
        the call log around every call (write-ahead row last, completion after)."""
        if settings.chatops_read_only:
            hooks.add_pre(ReadOnlyGuard(enabled=True), name="read_only", priority=10)
        hooks.add_pre(approval, name=name, priority=GATE_PRIORITY)
        hooks.add_pre(
            CallStartHook(db=self.db), name="call_log_start", priority=CALL_START_PRIORITY
        )
        truncate = TruncateResultGuard(max_chars=settings.chatops_tool_result_max_chars)
        hooks.add_post(truncate, name="truncate_result", priority=10)
        hooks.add_post(CallLogHook(db=self.db), name="call_log", priority=90)

    async def record_answer(
        self, ctx: PreToolUseContext[Any], status: str, reason: str
    ) -> ApprovalNote:
        """One approval asked at the terminal and how the OS user answered it (approved or
        rejected); returns the note the call log records with the call."""
        if self.run is None or self.conversation is None:
            return ApprovalNote(status=status, approvers=(self.user,))
        secrets = list(ctx.tool.secret_values())
        now = utcnow()
        row = approval_queries.new_approval(
            run_id=self.run.id,
            conversation_id=self.conversation.id,
            tool_call_id=ctx.tool_call_id,
            tool_name=ctx.tool.name,
            connector=ctx.tool.connector,
            action=ctx.tool.action or ctx.tool.name,
            arguments=mask_known(dict(ctx.args), secrets),
            fingerprint=ctx.fingerprint,
            reason=mask_known(ctx.reasoning, secrets),
            risk=ctx.tool.policy.risk,
            requester=self.user,
            requesters=list(ctx.requesters),
            approvers=list(ctx.tool.policy.approvers),
            min_approvals=1,
            allow_self_approval=True,
            card_platform=PLATFORM,
            expires_at=now,  # answered at once: nothing waits on it
        )
        decision = ApprovalDecision(
            approval_id=row.id,
            user_id=self.user,
            decision="approve" if status == "approved" else "reject",
            reason=reason,
        )
        await self.db.run(_record, row, decision, status, reason)
        return ApprovalNote(status=status, approval_id=row.id, approvers=(self.user,))

    async def finish(self, status: str, *, answer: str = "", error: str | None = None) -> None:
        if self.run is not None:
            values: dict[str, Any] = {"answer": answer} if answer else {"error": error}
            await self.db.run(
                queries.finish_run, self.run.id, None, status=status, current=("running",),
                **values,
            )  # fmt: skip

    def close(self) -> None:
        self.db.close()
        self.engine.dispose()


def _record(session: Any, row: Any, decision: ApprovalDecision, status: str, reason: str) -> None:
    approval_queries.add_approval(session, row)
    approval_queries.conclude_approval(
        session, row.id, status, decided_by=[decision.user_id], reason=reason
    )
    approval_queries.add_decision(session, decision)
