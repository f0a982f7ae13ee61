"""The status reporter's coalescing, and the small guards, with no database or model involved."""

from __future__ import annotations

import asyncio

from bot.approvals.schema import ApprovalPolicy, policy_metadata
from bot.chat.events import ApprovalEnded, ApprovalWaiting
from bot.chat.threads import MessageRef, ThreadRef
from bot.chat.views import StatusView
from bot.engine.events import Done, IterationDone, IterationStart, TokenUsage
from bot.engine.hooks import PostToolUseContext, PreToolUseContext, RunContext
from bot.engine.tools import Tool, ToolResult, fingerprint
from bot.rate_limits import PRUNE_EVERY, ToolRateLimits
from bot.runs.status import StatusReporter
from hooks.guards import RateLimitGuard, ReadOnlyGuard, TruncateResultGuard
from tests.fakes.recording import RecordingSurface

THREAD = ThreadRef("test", "T1", "C1", "1.0")


class SlowSurface(RecordingSurface):
    """Edits wait on a gate, and the surface counts how many are in flight at once."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()
        self.in_flight = 0
        self.max_in_flight = 0

    async def update_status(self, ref: MessageRef, view: StatusView) -> None:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await self._record("edit_started", ref.thread, view, message_id=ref.message_id)
            await self.gate.wait()
            await super().update_status(ref, view)
        finally:
            self.in_flight -= 1


async def test_edits_coalesce_one_in_flight_and_the_last_state_wins() -> None:
    surface = SlowSurface()
    reporter = StatusReporter(surface, THREAD, min_interval_s=0.001)
    await reporter.open()
    reporter.on_event(IterationStart(1, "ops__a", {}, "c0"))
    await surface.wait_for(lambda: surface.of("edit_started"))  # first edit is now in flight
    for i in range(1, 40):  # a burst while that edit hangs
        reporter.on_event(IterationStart(i, f"ops__{i}", {}, f"c{i}"))
        done = IterationDone(i, f"ops__{i}", "ok", iter_elapsed=0.5, tool_call_id=f"c{i}")
        reporter.on_event(done)
    surface.gate.set()
    reporter.on_event(Done("answer", 39, TokenUsage(100, 20)))
    await reporter.finish("done", headline="Done", iterations=39)

    assert surface.max_in_flight == 1
    edits = surface.of("update_status")
    assert 1 <= len(edits) <= 3  # 80 events became at most three edits
    assert reporter.edits == len(edits)
    last = edits[-1].payload
    assert last.state == "done" and last.headline == "Done"
    assert len(last.steps) == 40 and all(s.state == "done" for s in last.steps)
    assert "40 tool calls" in last.totals and "120 tokens" in last.totals
    assert surface.status_of()[0] == last


async def test_approval_events_show_waiting_then_blocked() -> None:
    surface = RecordingSurface()
    reporter = StatusReporter(surface, THREAD, min_interval_s=0.001)
    await reporter.open()
    reporter.on_event(IterationStart(1, "ops__restart", {}, "c1"))
    reporter.on_event(ApprovalWaiting("c1", "ops__restart", "a1"))
    await surface.wait_for(
        lambda: (
            surface.of("update_status")
            and surface.of("update_status")[-1].payload.state == "waiting_approval"
        )
    )
    waiting = surface.of("update_status")[-1].payload
    assert waiting.steps[0].state == "waiting_approval" and "approval" in waiting.headline.lower()
    reporter.on_event(ApprovalEnded("c1", "ops__restart", "a1", "rejected", ("U_LEAD",)))
    reporter.on_event(IterationDone(1, "ops__restart", "no", blocked=True, tool_call_id="c1"))
    await reporter.finish("done", headline="Done", iterations=1)
    final = surface.status_of()[0]
    assert final.steps[0].state == "blocked" and final.steps[0].detail == "rejected by U_LEAD"


async def test_a_failing_edit_is_logged_and_the_next_state_still_sent() -> None:
    surface = RecordingSurface()
    reporter = StatusReporter(surface, THREAD, min_interval_s=0.001)
    await reporter.open()
    surface.fail_next("update_status")
    reporter.on_event(IterationStart(1, "ops__a", {}, "c1"))
    await reporter.finish("failed", headline="Failed")
    assert surface.status_of()[0].state == "failed"


def _tool(name: str, *, mutating: bool = False) -> Tool:
    async def invoke(args: dict) -> ToolResult:
        return ToolResult("x")

    return Tool(
        name=name,
        description=name,
        parameters={},
        invoke=invoke,
        metadata=policy_metadata(ApprovalPolicy(mutating=mutating)),
    )


def _pre(tool: Tool) -> PreToolUseContext:
    fp = fingerprint(tool.name, {})
    return PreToolUseContext(tool=tool, tool_call_id="c", args={}, fingerprint=fp, run=RunContext())


async def test_read_only_guard_blocks_only_mutating_tools_while_on() -> None:
    guard = ReadOnlyGuard(enabled=True)
    assert not (await guard(_pre(_tool("ops__restart", mutating=True)))).allowed
    assert (await guard(_pre(_tool("ops__status")))).allowed
    guard.enabled = False
    assert (await guard(_pre(_tool("ops__restart", mutating=True)))).allowed


def _in(conversation: int, user: str, tool: Tool) -> PreToolUseContext:
    fp = fingerprint(tool.name, {})
    run = RunContext(run_id=f"r{conversation}", conversation_id=conversation, requester=user)
    return PreToolUseContext(tool=tool, tool_call_id="c", args={}, fingerprint=fp, run=run)


async def test_rate_limit_guard_scopes_per_conversation_user_and_process() -> None:
    guard = RateLimitGuard(ToolRateLimits(per_conversation=2, per_user=3, total=5), period_s=3600)
    a, b = _tool("ops__a"), _tool("ops__b")
    assert [(await guard(_in(1, "U1", a))).allowed for _ in range(3)] == [True, True, False]
    assert (await guard(_in(1, "U1", b))).allowed  # another tool has its own budget
    refused = await guard(_in(1, "U1", a))
    assert "limit 2 per minute in this conversation" in refused.reason
    assert (await guard(_in(2, "U1", a))).allowed  # U1's third call of ops__a, elsewhere
    by_user = await guard(_in(3, "U1", a))
    assert not by_user.allowed and "per minute for U1" in by_user.reason
    assert [(await guard(_in(c, f"U{c}", a))).allowed for c in (4, 5, 6)] == [
        True,
        True,
        False,  # five calls of ops__a in the whole process
    ]
    assert "for the whole bot" in (await guard(_in(7, "U7", a))).reason


async def test_rate_limit_buckets_are_dropped_once_drained() -> None:
    """Thousands of conversations come and go: the guard keeps only buckets still filling."""
    guard = RateLimitGuard(
        ToolRateLimits(per_conversation=5, per_user=5, total=10**6), period_s=1e-6
    )
    a = _tool("ops__a")
    for conversation in range(3 * PRUNE_EVERY):
        assert (await guard(_in(conversation, f"U{conversation}", a))).allowed
    assert guard.tracked_keys() < PRUNE_EVERY


async def test_truncate_guard_cuts_long_results_and_says_so() -> None:
    guard = TruncateResultGuard(max_chars=10)
    tool = _tool("ops__a")
    ctx = PostToolUseContext(
        tool=tool,
        tool_call_id="c",
        args={},
        fingerprint="f",
        run=RunContext(),
        result=ToolResult("y" * 50),
        outcome="executed",
    )
    out = await guard(ctx)
    assert out.result is not None and out.result.content.startswith("y" * 10)
    assert "40 more characters cut" in out.result.content
    short = await guard(PostToolUseContext(**{**ctx.__dict__, "result": ToolResult("short")}))
    assert short.result is None
