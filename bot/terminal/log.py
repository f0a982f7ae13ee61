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

from bot.approvals.schema import policy_of
from bot.audit.sinks.wiring import configured_sinks
from bot.clock import utcnow
from bot.config import Settings
from bot.engine.hooks import HookRegistry, PreHook, PreToolUseContext, RunContext
from bot.engine.notes import ApprovalNote
from bot.errors import ChatopsError
from bot.redaction import Redactor, mask_known
from bot.runs.leases import LeaseKeeper, ProcessIdentity
from bot.statuses import ApprovalStatus, RunStatus
from bot.storage import approval_queries
from bot.storage import queries as queries
from bot.storage.database import (
    Database,
    create_db_engine,
    db_error_reason,
    init_schema,
    safe_database_url,
)
from bot.storage.models import ApprovalDecision, Conversation, Run
from bot.storage.opening import prepare_database
from bot.terminal.lease import TerminalLease
from hooks.chain import terminal_chain

PLATFORM = "terminal"


class TerminalLogError(ChatopsError):
    """The database cannot be opened; the message names it (password hidden) and why."""


class TerminalLog:
    """The database of one `chatops chat`: open it, start the run, record, finish, close."""

    def __init__(self, engine: Engine, *, user: str, settings: Settings) -> None:
        self.engine = engine
        # its events wait in the audit outbox for a `chatops serve` on this database to ship
        self.db = Database(engine, audit_sinks=configured_sinks(settings))
        self.user = user
        identity = ProcessIdentity.of_this_process(settings.chatops_node_name)
        self.lease = TerminalLease(LeaseKeeper(self.db, identity, settings.chatops_lease_s))
        self.run: Run | None = None
        self.conversation: Conversation | None = None
        self.redactor: Redactor | None = None  # set by `install`

    @classmethod
    async def open(cls, settings: Settings, *, user: str) -> TerminalLog:
        """`DATABASE_URL`, migrated to the newest schema like `chatops serve` does."""
        url = settings.database_url
        await asyncio.to_thread(prepare_database, url)  # as serve: directories, reachability
        try:
            engine = create_db_engine(url)
            await asyncio.to_thread(init_schema, engine)
        except (ArgumentError, ImportError, SQLAlchemyError) as exc:
            raise TerminalLogError(
                f"cannot open the database {safe_database_url(url)} (DATABASE_URL), where "
                f"chatops chat keeps its call log: {db_error_reason(exc)}"
            ) from None
        return cls(engine, user=user, settings=settings)

    async def start(self, request: str) -> RunContext[None]:
        """The conversation and run rows (the run owned and leased by this process, so no
        `chatops serve` takes it); the context every hook of this run sees."""
        await self.lease.register()
        run = queries.new_run(
            conversation_id=0, requester=self.user, query=request, owner=self.lease.me
        )
        key = (PLATFORM, socket.gethostname(), self.user, run.id)
        conv = await self.db.run(queries.get_or_create_conversation, *key, direct=True)
        run.conversation_id = conv.id or 0
        self.run = await self.db.run(queries.add_run, run, self.lease.lease_s)
        self.lease.hold(self.run)
        self.conversation = conv
        return RunContext(
            run_id=run.id,
            requester=self.user,
            conversation_id=conv.id,
            platform=PLATFORM,
            workspace=conv.workspace,
            channel=self.user,
            direct=True,
        )

    def install(
        self,
        approval: PreHook,
        settings: Settings,
        *,
        name: str,
        redactor: Redactor | None = None,
    ) -> HookRegistry:
        """The hooks of this conversation (`hooks.chain.terminal_chain`): `approval` where the
        server's gate sits, the server's guards, and the call log around every call."""
        self.redactor = redactor  # approval rows hide every known secret too
        return terminal_chain(
            settings,
            approval=approval,
            approval_name=name,
            db=self.db,
            fence=self.lease.fence,
            redactor=redactor,
        )

    async def record_answer(
        self, ctx: PreToolUseContext[Any], status: ApprovalStatus, reason: str
    ) -> ApprovalNote:
        """One approval asked at the terminal and how the OS user answered it (approved or
        rejected); returns the note the call log records with the call."""
        if self.run is None or self.conversation is None:
            return ApprovalNote(status=status, approvers=(self.user,))
        known = self.redactor.secrets() if self.redactor is not None else []
        secrets = [*ctx.tool.secret_values(), *known]
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
            risk=policy_of(ctx.tool).risk,
            requester=self.user,
            requesters=list(ctx.requesters),
            approvers=list(policy_of(ctx.tool).approvers),
            min_approvals=1,
            allow_self_approval=True,
            card_platform=PLATFORM,
            expires_at=now,  # answered at once: nothing waits on it
        )
        decision = ApprovalDecision(
            approval_id=row.id,
            user_id=self.user,
            decision="approve" if status == ApprovalStatus.APPROVED else "reject",
            reason=reason,
        )
        await self.db.run(_record, row, decision, status, reason)
        return ApprovalNote(status=status, approval_id=row.id, approvers=(self.user,))

    async def finish(
        self, status: RunStatus, *, answer: str = "", error: str | None = None
    ) -> bool:
        """End the run, only at the lease epoch this process holds; False when it could not
        (another process took the run over while this one was paused past its lease)."""
        if self.run is None:
            return True
        values: dict[str, Any] = {"answer": answer} if answer else {"error": error}
        return await self.db.run(
            queries.finish_run, self.run.id, None, status=status, current=(RunStatus.RUNNING,),
            fence=self.lease.fence(), **values,
        )  # fmt: skip

    async def aclose(self) -> None:
        """Release the run's lease, then close the database."""
        await self.lease.close()
        await asyncio.to_thread(self.close)

    def close(self) -> None:
        self.db.close()
        self.engine.dispose()


def _record(
    session: Any, row: Any, decision: ApprovalDecision, status: ApprovalStatus, reason: str
) -> None:
    approval_queries.add_approval(session, row)
    approval_queries.conclude_approval(
        session, row.id, status, decided_by=[decision.user_id], reason=reason
    )
    approval_queries.add_decision(session, decision)
