"""The one ordered hook chain: which hooks run around a tool call, and in which order.

The order is security-relevant, so it is said once, here, by name. PreToolUse: `call_replay`
first (a call already logged for a resumed run is never run again), the cheap guards next
(`read_only`, `rate_limit`, `audit_viewers`: refused before a human is asked), then the approval
gate, then `credentials` (a call acting as a person waits for them to connect their account;
after the gate, which names the approver), and `call_log_start` last (the write-ahead row means
"every check allowed it, it goes out"). PostToolUse: `redact_result` first (no known secret
reaches the model), then `truncate_result`, then `edit_notice` (an approver's edit of the call,
told to the model), then `call_log` (it stores what the model saw), then `trace_tool`
(tracing on: the call's span).

Every entry point builds its registry here: `serve_chain` (`chatops serve`, `bot.runtime`),
`terminal_chain` (`chatops chat`), and `runtime_chain` (the serve chain with the optional guards
chosen by the caller: the run tests and the benches). `tests/hooks/test_chain.py` asserts the
order each one builds.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import IntEnum, auto
from typing import Any

from opentelemetry.trace import Tracer

from bot.approvals.broker import ApprovalBroker
from bot.audit.tool import AUDIT_TOOL_NAME, AuditViewerHook
from bot.chat.workspaces import WorkspacePolicies
from bot.config import Settings
from bot.engine.hooks import HookRegistry, PostHook, PreHook, PreToolUseContext
from bot.observability.metrics import Metrics
from bot.redaction import Redactor
from bot.runs.deps import run_deps
from bot.storage.database import Database
from bot.storage.fencing import Fence
from connectors.oauth_service import OAuthService
from hooks.approval_gate import ApprovalGateHook, EditNoticeHook
from hooks.call_log import CallLogHook, CallReplayHook, CallStartHook
from hooks.credentials import CredentialLinkHook
from hooks.guards import RateLimitGuard, ReadOnlyGuard, RedactResultHook, TruncateResultGuard
from hooks.tracing import ToolSpanHook


class Pre(IntEnum):
    """PreToolUse positions: the chain runs them in this (declaration) order; a hook is
    registered under its position's name, lower-cased, unless the entry point names it."""

    CALL_REPLAY = auto()
    READ_ONLY = auto()
    RATE_LIMIT = auto()
    AUDIT_VIEWERS = auto()
    APPROVAL_GATE = auto()
    CREDENTIALS = auto()  # after the gate: an approver's credentials need the approver
    CALL_LOG_START = auto()


class Post(IntEnum):
    """PostToolUse positions, run in this (declaration) order."""

    REDACT_RESULT = auto()
    TRUNCATE_RESULT = auto()
    EDIT_NOTICE = auto()  # after the cut: the model always reads that its call was edited
    CALL_LOG = auto()
    TRACE_TOOL = auto()  # only when tracing is on


def add_pre(
    registry: HookRegistry, position: Pre, hook: PreHook, *, name: str = "", tools: str = "*"
) -> None:
    """Register `hook` at `position` (a tie keeps registration order)."""
    registry.add_pre(hook, name=name or position.name.lower(), priority=position, tools=tools)


def add_post(registry: HookRegistry, position: Post, hook: PostHook) -> None:
    """Register `hook` at `position`."""
    registry.add_post(hook, name=position.name.lower(), priority=position)


def runtime_chain(
    *,
    broker: ApprovalBroker,
    db: Database,
    redactor: Redactor | None = None,
    read_only: ReadOnlyGuard | None = None,
    rate_limit: RateLimitGuard | None = None,
    audit_viewers: AuditViewerHook | None = None,
    truncate: TruncateResultGuard | None = None,
    credentials: CredentialLinkHook | None = None,
    metrics: Metrics | None = None,
    tracer: Tracer | None = None,
) -> HookRegistry:
    """The runtime's chain with the approval broker's gate; a guard left out is not in it.

    `redactor`: the process's secrets (cards, call log, results; without it no result
    redaction hook); `audit_viewers` guards only `audit__report`; `metrics`: the runtime's
    (the call log counts every attempt); `tracer` (tracing on): a span per approval wait and
    per tool call.
    """
    hooks = HookRegistry()
    add_pre(hooks, Pre.CALL_REPLAY, CallReplayHook(db=db))
    if read_only is not None:
        add_pre(hooks, Pre.READ_ONLY, read_only)
    if rate_limit is not None:
        add_pre(hooks, Pre.RATE_LIMIT, rate_limit)
    if audit_viewers is not None:
        add_pre(hooks, Pre.AUDIT_VIEWERS, audit_viewers, tools=AUDIT_TOOL_NAME)
    gate = ApprovalGateHook(broker=broker, redactor=redactor, tracer=tracer)
    add_pre(hooks, Pre.APPROVAL_GATE, gate)
    if credentials is not None:
        add_pre(hooks, Pre.CREDENTIALS, credentials)
    add_pre(hooks, Pre.CALL_LOG_START, CallStartHook(db=db, redactor=redactor, metrics=metrics))
    if redactor is not None:
        add_post(hooks, Post.REDACT_RESULT, RedactResultHook(redactor))
    if truncate is not None:
        add_post(hooks, Post.TRUNCATE_RESULT, truncate)
    add_post(hooks, Post.EDIT_NOTICE, EditNoticeHook())
    add_post(hooks, Post.CALL_LOG, CallLogHook(db=db, redactor=redactor, metrics=metrics))
    if tracer is not None:
        add_post(hooks, Post.TRACE_TOOL, ToolSpanHook(tracer))
    return hooks


def serve_chain(
    settings: Settings,
    *,
    db: Database,
    broker: ApprovalBroker,
    redactor: Redactor,
    oauth: Callable[[], OAuthService | None] = lambda: None,
    metrics: Metrics | None = None,
    tracer: Tracer | None = None,
    workspaces: WorkspacePolicies | None = None,
) -> HookRegistry:
    """`chatops serve`: every hook, the guards configured from `settings`; `oauth`: the
    runtime's per-user credentials (the `credentials` hook waits for a person to connect);
    `workspaces`: per-workspace audit viewers (`CHATOPS_WORKSPACES_FILE`)."""
    return runtime_chain(
        broker=broker,
        db=db,
        redactor=redactor,
        read_only=ReadOnlyGuard(enabled=settings.chatops_read_only),
        rate_limit=RateLimitGuard(settings.tool_rate_limits),
        audit_viewers=AuditViewerHook(settings, workspaces=workspaces, place_of=_run_place),
        truncate=TruncateResultGuard(max_chars=settings.chatops_tool_result_max_chars),
        credentials=CredentialLinkHook(oauth, wait_s=settings.chatops_oauth_wait_s),
        metrics=metrics,
        tracer=tracer,
    )


def terminal_chain(
    settings: Settings,
    *,
    approval: PreHook,
    approval_name: str,
    db: Database,
    fence: Callable[[], Fence | None],
    redactor: Redactor | None = None,
) -> HookRegistry:
    """`chatops chat`: the terminal's `approval` where the server's gate sits, the read-only
    guard when it is on, and the call log around every call (the run's lease `fence` on the
    write-ahead row). No replay (a terminal run is never resumed), no rate limit."""
    hooks = HookRegistry()
    if settings.chatops_read_only:
        add_pre(hooks, Pre.READ_ONLY, ReadOnlyGuard(enabled=True))
    add_pre(hooks, Pre.APPROVAL_GATE, approval, name=approval_name)
    add_pre(hooks, Pre.CALL_LOG_START, CallStartHook(db=db, redactor=redactor, fence=fence))
    if redactor is not None:
        add_post(hooks, Post.REDACT_RESULT, RedactResultHook(redactor))
    truncate = TruncateResultGuard(max_chars=settings.chatops_tool_result_max_chars)
    add_post(hooks, Post.TRUNCATE_RESULT, truncate)
    add_post(hooks, Post.CALL_LOG, CallLogHook(db=db, redactor=redactor))
    return hooks


def _run_place(ctx: PreToolUseContext[Any]) -> tuple[str, str] | None:
    """The (platform, workspace) of the thread a call's run is in; None outside a serve run."""
    deps = run_deps(ctx.run)
    return None if deps is None else (deps.thread.platform, deps.thread.workspace)
