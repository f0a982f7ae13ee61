"""HookRegistry ordering, glob filters, rewrites and fail-closed behaviour, without the engine."""

from __future__ import annotations

from bot.engine.hooks import (
    HookRegistry,
    HookResult,
    PostToolUseContext,
    PreToolUseContext,
    RunContext,
)
from bot.engine.notes import ApprovalNote, Notes
from bot.engine.tools import Tool, ToolResult, fingerprint


async def _noop(args: dict) -> ToolResult:
    return ToolResult("ok")


TOOL = Tool(name="ops__restart", description="Restart", parameters={}, invoke=_noop)


def _pre(args: dict) -> PreToolUseContext:
    return PreToolUseContext(
        tool=TOOL,
        tool_call_id="c1",
        args=args,
        fingerprint=fingerprint(TOOL.name, args),
        run=RunContext(run_id="r1"),
    )


async def test_a_rewrite_rebinds_the_fingerprint_later_hooks_see() -> None:
    registry = HookRegistry()
    seen: list[str] = []

    async def rewrite(ctx: PreToolUseContext) -> HookResult:
        return HookResult.rewrite(args={"id": "api", "force": False})

    async def record(ctx: PreToolUseContext) -> HookResult:
        seen.append(ctx.fingerprint)
        return HookResult.allow()

    registry.add_pre(record, priority=20)
    registry.add_pre(rewrite, priority=10)
    decision = await registry.run_pre(_pre({"id": "api", "force": True}))
    assert decision.allowed
    assert decision.args == {"id": "api", "force": False}
    assert seen == [fingerprint(TOOL.name, {"id": "api", "force": False})]


async def test_a_raising_hook_blocks_and_names_itself_and_glob_filters_apply() -> None:
    registry = HookRegistry()
    calls: list[str] = []

    async def other_tools_only(ctx: PreToolUseContext) -> HookResult:
        calls.append("other")
        return HookResult.block("never for ops")

    async def broken(ctx: PreToolUseContext) -> HookResult:
        raise RuntimeError("boom")

    registry.add_pre(other_tools_only, tools="github__*")
    registry.add_pre(broken, name="broken-check", tools="ops__*")
    decision = await registry.run_pre(_pre({"id": "api"}))
    assert not decision.allowed
    assert decision.blocked_by == "broken-check"
    assert "broken-check" in decision.reason
    assert calls == []


async def test_a_failing_post_hook_withholds_the_result() -> None:
    registry = HookRegistry()

    async def broken(ctx: PostToolUseContext) -> HookResult:
        raise RuntimeError("boom")

    registry.add_post(broken, name="scrubber")
    ctx = PostToolUseContext(
        tool=TOOL,
        tool_call_id="c1",
        args={},
        fingerprint="f",
        run=RunContext(),
        result=ToolResult("password=hunter2"),
        outcome="executed",
    )
    result = await registry.run_post(ctx)
    assert result.is_error
    assert "hunter2" not in result.content
    assert "scrubber" in result.content


async def test_typed_notes_reach_later_hooks_and_an_approval_binds_the_arguments() -> None:
    """A hook's `ApprovalNote` is what later hooks read (by type, not by a string key); a
    rewrite after it bound the fingerprint blocks the call, naming the rewriting hook."""
    registry = HookRegistry()
    seen: list[ApprovalNote | None] = []

    async def approve(ctx: PreToolUseContext) -> HookResult:
        note = ApprovalNote(status="approved", approval_id="a1", bound_fingerprint=ctx.fingerprint)
        return HookResult.allow(note=note)

    async def read(ctx: PreToolUseContext) -> HookResult:
        seen.append(ctx.notes.get(ApprovalNote))
        return HookResult.allow()

    async def widen(ctx: PreToolUseContext) -> HookResult:
        return HookResult.rewrite(args={**ctx.args, "force": True})

    registry.add_pre(approve, priority=10)
    registry.add_pre(read, priority=20)
    registry.add_pre(widen, name="widen", priority=30)
    decision = await registry.run_pre(_pre({"id": "api"}))
    assert [note.approval_id if note else None for note in seen] == ["a1"]
    assert not decision.allowed and decision.blocked_by == "widen"
    assert "after they were approved" in decision.reason
    assert decision.notes.get(ApprovalNote) == seen[0]


def test_notes_hold_one_note_per_type() -> None:
    first, second = ApprovalNote(status="blocked"), ApprovalNote(status="approved")
    notes = Notes().add(first).add("other").add(second)
    assert notes.get(ApprovalNote) is second and notes.get(str) == "other"
    assert len(notes) == 2 and Notes().get(ApprovalNote) is None
