"""Small guards around tool calls: read-only mode, per-tool rate limits, result redaction and
truncation.

State (the read-only flag, rate buckets) lives on the hook instance, owned by the app.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from bot.approvals.schema import policy_of
from bot.chat.events import RateLimited
from bot.engine.events import emit_safely
from bot.engine.hooks import HookResult, PostToolUseContext, PreToolUseContext
from bot.rate_limits import KeyedLimiter, ToolRateLimits
from bot.redaction import Redactor, mask_known, redact_text
from bot.runs.deps import run_deps

log = logging.getLogger(__name__)


class ReadOnlyGuard:
    """PreToolUse: while on, calls to mutating tools are blocked (maintenance, incidents)."""

    name = "read_only"

    def __init__(self, *, enabled: bool = False) -> None:
        self.enabled = enabled

    async def __call__(self, ctx: PreToolUseContext[Any]) -> HookResult:
        if self.enabled and policy_of(ctx.tool).mutating:
            return HookResult.block(
                f"The bot is in read-only mode, so `{ctx.tool.name}` (which changes things) did "
                "not run. Only read-only tools are available right now."
            )
        return HookResult.allow()


_SCOPE_TEXT = {
    "conversation": "in this conversation",
    "user": "for {who}",
    "total": "for the whole bot",
}


class RateLimitGuard:
    """PreToolUse: refuse a call over its tool's limit in any scope (conversation, user, all).

    A refusal is logged as a WARNING, the model is told to wait or use what it has, and the run
    is sent a `RateLimited` event, so its thread is told too. A refused call uses no budget.
    """

    name = "rate_limit"

    def __init__(self, limits: ToolRateLimits, *, period_s: float = 60.0) -> None:
        self.limits = limits
        self._scopes = {
            "conversation": KeyedLimiter(limits.per_conversation, period_s),
            "user": KeyedLimiter(limits.per_user, period_s),
            "total": KeyedLimiter(limits.total, period_s),
        }

    def tracked_keys(self) -> int:
        """Buckets held right now (they are dropped once drained)."""
        return sum(len(limiter) for limiter in self._scopes.values())

    async def __call__(self, ctx: PreToolUseContext[Any]) -> HookResult:
        run, tool = ctx.run, ctx.tool.name
        # the call is made for every requester: it counts against each one's limit
        people = ctx.requesters or (run.requester,)
        keys = [
            ("conversation", f"{run.conversation_id or run.run_id}/{tool}", ""),
            *(("user", f"{person}/{tool}", person) for person in people),
            ("total", tool, ""),
        ]
        full = next(
            ((scope, who) for scope, key, who in keys if not self._scopes[scope].has_capacity(key)),
            None,
        )
        if full is not None:
            return await self._refuse(ctx, *full)
        for scope, key, _ in keys:
            await self._scopes[scope].take(key)
        return HookResult.allow()

    async def _refuse(self, ctx: PreToolUseContext[Any], scope: str, who: str) -> HookResult:
        limit = int(self._scopes[scope].max_rate)
        where = _SCOPE_TEXT[scope].format(who=who or ctx.run.requester or "this user")
        log.warning(
            "rate limit: %s refused in run %s (conversation %s, user %s): %d calls per minute %s",
            ctx.tool.name, ctx.run.run_id, ctx.run.conversation_id, ctx.run.requester, limit,
            where,
        )  # fmt: skip
        deps = run_deps(ctx.run)
        emit = deps.emit if deps is not None else None
        await emit_safely(emit, RateLimited(ctx.tool.name, limit, where))
        return HookResult.block(
            f"`{ctx.tool.name}` was called too often (limit {limit} per minute {where}), so "
            "this call did not run. Wait or use what you have."
        )


class TruncateResultGuard:
    """PostToolUse: cut observations to `max_chars`, saying so, to protect the context budget.

    What is cut is redacted first (with the tool's secrets): a secret cut in half at the limit
    would no longer be recognised by any later redaction.
    """

    name = "truncate_result"

    def __init__(self, *, max_chars: int = 8000) -> None:
        self._max = max_chars

    async def __call__(self, ctx: PostToolUseContext[Any]) -> HookResult:
        if len(ctx.result.content) <= self._max:
            return HookResult.allow()
        text = redact_text(ctx.result.content, ctx.tool.secret_values())
        if len(text) > self._max:
            text = f"{text[: self._max]}\n[... {len(text) - self._max} more characters cut]"
        return HookResult.rewrite(result=replace(ctx.result, content=text))  # images kept


class RedactResultHook:
    """PostToolUse, first: every secret the process knows (another connector's token, the
    platforms' tokens, the model key) is masked in the result before the model, the call log
    or anything after reads it; the tool's own secrets too."""

    name = "redact_result"

    def __init__(self, redactor: Redactor) -> None:
        self._redactor = redactor

    async def __call__(self, ctx: PostToolUseContext[Any]) -> HookResult:
        content = self._redactor.known_text(ctx.result.content)
        content = mask_known(content, list(ctx.tool.secret_values()))
        if content == ctx.result.content:
            return HookResult.allow()
        return HookResult.rewrite(result=replace(ctx.result, content=content))
