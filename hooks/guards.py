"""Small guards around tool calls: read-only mode, a per-tool rate limit, result truncation.

State (the read-only flag, rate buckets) lives on the hook instance, owned by the app.
"""

from __future__ import annotations

import time
from collections import deque

from bot.engine.tools import ToolResult
from bot.redaction import redact_text
from hooks.registry import HookResult, PostToolUseContext, PreToolUseContext


class ReadOnlyGuard:
    """PreToolUse: while on, calls to mutating tools are blocked (maintenance, incidents)."""

    name = "read_only"

    def __init__(self, *, enabled: bool = False) -> None:
        self.enabled = enabled

    async def __call__(self, ctx: PreToolUseContext) -> HookResult:
        if self.enabled and ctx.tool.policy.mutating:
            return HookResult.block(
                f"The bot is in read-only mode, so `{ctx.tool.name}` (which changes things) did "
                "not run. Only read-only tools are available right now."
            )
        return HookResult.allow()


class RateLimitGuard:
    """PreToolUse: at most `max_calls` calls of one tool per `per_s` seconds (sliding window)."""

    name = "rate_limit"

    def __init__(self, *, max_calls: int, per_s: float) -> None:
        self._max = max_calls
        self._window = per_s
        self._calls: dict[str, deque[float]] = {}

    async def __call__(self, ctx: PreToolUseContext) -> HookResult:
        now = time.monotonic()
        recent = self._calls.setdefault(ctx.tool.name, deque())
        while recent and now - recent[0] >= self._window:
            recent.popleft()
        if len(recent) >= self._max:
            return HookResult.block(
                f"`{ctx.tool.name}` was called too often (limit {self._max} per "
                f"{self._window:g} s), so this call did not run. Wait or use what you have."
            )
        recent.append(now)
        return HookResult.allow()


class TruncateResultGuard:
    """PostToolUse: cut observations to `max_chars`, saying so, to protect the context budget.

    What is cut is redacted first (with the tool's secrets): a secret cut in half at the limit
    would no longer be recognised by any later redaction.
    """

    name = "truncate_result"

    def __init__(self, *, max_chars: int = 8000) -> None:
        self._max = max_chars

    async def __call__(self, ctx: PostToolUseContext) -> HookResult:
        if len(ctx.result.content) <= self._max:
            return HookResult.allow()
        text = redact_text(ctx.result.content, ctx.tool.secret_values())
        if len(text) > self._max:
            text = f"{text[: self._max]}\n[... {len(text) - self._max} more characters cut]"
        return HookResult.rewrite(result=ToolResult(content=text, is_error=ctx.result.is_error))
