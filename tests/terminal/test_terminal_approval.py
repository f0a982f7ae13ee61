"""The terminal approval hook of `chatops chat`, driven through a real HookRegistry."""

from __future__ import annotations

import io

from bot.approvals.schema import ApprovalPolicy, policy_metadata
from bot.engine.hooks import HookRegistry, PreToolUseContext, RunContext
from bot.engine.tools import Tool, ToolResult, fingerprint
from bot.terminal.approval import TerminalApproval

SECRET = "tok-3x4mple-value"


async def _noop(args: dict) -> ToolResult:
    return ToolResult("ok")


def context(*, mutating: bool, approval: str = "auto") -> PreToolUseContext:
    tool = Tool(
        name="ops__restart", description="Restart", parameters={"type": "object"}, invoke=_noop,
        connector="ops", action="restart",
        metadata=policy_metadata(ApprovalPolicy(approval=approval, mutating=mutating, risk="high")),  # type: ignore[arg-type]
        secret_values=lambda: [SECRET],
    )  # fmt: skip
    args = {"service": "api", "token": "abc", "note": f"use {SECRET}"}
    return PreToolUseContext(
        tool=tool, tool_call_id="c1", args=args, fingerprint=fingerprint(tool.name, args),
        run=RunContext(requester="me"), reasoning="api is stuck",
    )  # fmt: skip


async def decide(mode: str, ctx: PreToolUseContext, stdin: str = "") -> tuple[bool, str, str]:
    err = io.StringIO()
    hooks = HookRegistry()
    hooks.add_pre(TerminalApproval(mode, stdin=io.StringIO(stdin), stderr=err))  # type: ignore[arg-type]
    decision = await hooks.run_pre(ctx)
    return decision.allowed, decision.reason, err.getvalue()


async def test_read_only_calls_never_ask() -> None:
    allowed, _, shown = await decide("ask", context(mutating=False))
    assert allowed and shown == ""
    allowed, _, shown = await decide("none", context(mutating=False))
    assert allowed and shown == ""


async def test_required_approval_asks_even_for_reads_and_yes_allows() -> None:
    allowed, _, shown = await decide("ask", context(mutating=False, approval="required"), "yes\n")
    assert allowed
    assert "tool:      ops__restart" in shown and "risk:      high" in shown
    assert "reason:    api is stuck" in shown
    assert SECRET not in shown and '"note": "use [REDACTED]"' in shown  # a known secret
    assert '"token": "abc"' in shown  # merely looks secret: shown as sent, and marked
    assert "looks like a secret (shown as sent): token" in shown


async def test_no_and_end_of_input_reject_with_a_do_not_retry_message() -> None:
    allowed, reason, _ = await decide("ask", context(mutating=True), "n\nnot during the freeze\n")
    assert not allowed
    assert "Reason: not during the freeze." in reason and "Do not retry" in reason
    allowed, reason, shown = await decide("ask", context(mutating=True), "")
    assert not allowed and "was NOT run" in reason and "Reason (optional)" not in shown


async def test_all_and_none_answer_without_reading() -> None:
    allowed, _, shown = await decide("all", context(mutating=True), "n\n")
    assert allowed and "approved ops__restart (--approve all)" in shown
    allowed, reason, _ = await decide("none", context(mutating=True), "y\n")
    assert not allowed and "REJECTED by the user" in reason
