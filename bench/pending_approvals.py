"""Bench: 1,000 runs waiting on approvals in one process; decide-to-resume latency; status edits.

Everything is the real runtime (RunManager, ApprovalBroker, ApprovalGateHook, call log, status
reporter, ReActAgent) on a SQLite file, with two stand-ins: an in-process scripted LLM (the HTTP
FakeOpenAI would measure aiohttp, not the runtime, and 1,000 runs of it do not fit in a minute on
2 cores) and a surface that only counts what it is asked to post or edit.

Figures:
- memory_per_pending_run: resident memory growth from 1,000 dispatches until all wait, per run.
- decide_to_resume p50/p99: from calling `broker.decide(...)` to the approved tool starting,
  1,000 decisions one after another while the resumed runs finish around them.
- status_edits_per_10_step_run: edits of the status message for one run of 10 tool steps (model
  50 ms and tool 200 ms per step, the production 1 s edit interval).
"""

from __future__ import annotations

import asyncio
import gc
import os
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot.approvals.broker import ApprovalBroker  # noqa: E402
from bot.approvals.schema import ApprovalPolicy, policy_metadata  # noqa: E402
from bot.chat.events import RunEvent  # noqa: E402
from bot.chat.threads import InboundMessage, MessageRef, ThreadRef  # noqa: E402
from bot.chat.views import AnswerFile, ApprovalCardView, StatusView  # noqa: E402
from bot.config import Settings  # noqa: E402
from bot.engine.agent import ReActAgent  # noqa: E402
from bot.engine.events import TokenUsage  # noqa: E402
from bot.engine.llm_replies import LLMResponse, ToolCall  # noqa: E402
from bot.engine.tools import Tool, ToolRegistry, ToolResult  # noqa: E402
from bot.runs.manager import RunManager  # noqa: E402
from bot.storage.database import Database, open_database  # noqa: E402
from hooks.chain import runtime_chain  # noqa: E402

RUNS = int(sys.argv[1]) if len(sys.argv) > 1 else 1000


class ScriptedLLM:
    """Calls `tool` `steps` times (one call per turn), then answers."""

    abilities: Mapping[str, bool] = {"tool_call": True, "json_mode": True}

    def __init__(self, tool: str, *, steps: int = 1, think_s: float = 0.0) -> None:
        self.model = "bench"
        self._tool = tool
        self._steps = steps
        self._think = think_s

    async def chat(self, messages: Sequence[dict[str, Any]], **_: Any) -> LLMResponse:
        if self._think:
            await asyncio.sleep(self._think)  # simulated model latency
        done = sum(1 for m in messages if m.get("role") == "tool")
        usage = TokenUsage(50, 10)
        if done >= self._steps:
            return LLMResponse(content="Done.", usage=usage, finish_reason="stop")
        call = ToolCall(id=f"call_{done}", name=self._tool, arguments='{"service": "api"}')
        return LLMResponse(content=None, tool_calls=(call,), usage=usage)

    async def stream_chat(self, messages: Sequence[dict[str, Any]]) -> AsyncIterator[str]:
        for piece in ("All ", "done."):
            yield piece


class CountingSurface:
    """A surface that answers at once and counts calls (status edits per message)."""

    platform = "bench"
    report_poster = None
    status_edit_interval_s = None

    def __init__(self) -> None:
        self._next = 0
        self.edits: dict[str, int] = {}
        self.cards = 0

    def _ref(self, thread: ThreadRef) -> MessageRef:
        self._next += 1
        return MessageRef(thread, str(self._next))

    async def post_status(self, thread: ThreadRef, view: StatusView) -> MessageRef:
        return self._ref(thread)

    async def update_status(self, ref: MessageRef, view: StatusView) -> None:
        self.edits[ref.message_id] = self.edits.get(ref.message_id, 0) + 1

    async def post_approval_card(self, thread: ThreadRef, view: ApprovalCardView) -> MessageRef:
        self.cards += 1
        return self._ref(thread)

    async def update_approval_card(self, ref: MessageRef, view: ApprovalCardView) -> None:
        return None

    async def post_answer(
        self,
        thread: ThreadRef,
        markdown: str,
        *,
        files: Sequence[AnswerFile] = (),
        feedback_run: str = "",
    ) -> MessageRef:
        return self._ref(thread)

    async def post_notice(
        self, thread: ThreadRef, text: str, *, mention: Sequence[str] = ()
    ) -> MessageRef:
        return self._ref(thread)

    async def notify_user(self, thread: ThreadRef, user_id: str, text: str) -> None:
        return None


def build(
    db: Database, llm: ScriptedLLM, tool: Tool, interval_s: float
) -> tuple[RunManager, ApprovalBroker, CountingSurface]:
    settings = Settings(
        chatops_approval_escalate_after_s=0, chatops_max_active_runs=5_000,
        # one person asks for every run: not a measure of the per-person caps
        chatops_max_active_runs_per_user=5_000, chatops_max_pending_approvals_per_user=5_000,
        # no heartbeat runs here (no PeerSync): a lease that lapsed while a thousand runs wait
        # would fence their calls off, and the bench would time leases, not resumes
        chatops_lease_s=3600,
    )  # fmt: skip
    broker = ApprovalBroker(db=db, settings=settings)
    hooks = runtime_chain(broker=broker, db=db)
    agent = ReActAgent(llm, ToolRegistry([tool]), hooks=hooks, completion_check=False)
    manager = RunManager(
        db=db, agent=agent, broker=broker, settings=settings, status_interval_s=interval_s
    )
    surface = CountingSurface()
    manager.register_surface(surface)  # type: ignore[arg-type]
    return manager, broker, surface


def resident_bytes() -> int:
    """Resident set size of this process (Linux /proc; what the machine actually pays)."""
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE")


def message(i: int) -> InboundMessage:
    return InboundMessage(
        thread=ThreadRef("bench", "T1", "C1", f"root{i}"),
        event_id=f"Ev{i}",
        user_id="U_DEV",
        text="restart api",
    )


async def pending_approvals(engine: Database) -> tuple[float, list[float]]:
    resumed = asyncio.Event()
    resumed_at = [0.0]

    async def restart(args: dict[str, Any]) -> ToolResult:
        resumed_at[0] = time.monotonic()  # decisions are one at a time: this is the latest one
        resumed.set()
        return ToolResult("restarted")

    tool = Tool(
        name="ops__restart",
        description="Restart a service",
        parameters={"type": "object", "properties": {"service": {"type": "string"}}},
        invoke=restart,
        connector="ops",
        action="restart",
        metadata=policy_metadata(ApprovalPolicy(approval="required", mutating=True)),
    )
    manager, broker, _surface = build(engine, ScriptedLLM("ops__restart"), tool, 1.0)
    waiting = asyncio.Event()
    count = 0

    def on_event(run_id: str, thread: ThreadRef, event: RunEvent) -> None:
        nonlocal count
        if event.type == "approval_waiting":
            count += 1
            if count == RUNS:
                waiting.set()

    manager.add_listener(on_event)
    gc.collect()
    before = resident_bytes()
    outcomes = await asyncio.gather(*(manager.dispatch(message(i)) for i in range(RUNS)))
    await asyncio.wait_for(waiting.wait(), 50)
    gc.collect()
    per_run_kb = (resident_bytes() - before) / RUNS / 1024

    runs = [o.run_id for o in outcomes]
    approvals = [await broker.find(run_id or "", "call_0") for run_id in runs]
    latencies: list[float] = []
    for approval in approvals:
        assert approval is not None
        resumed.clear()
        decided = time.monotonic()
        result = await broker.decide(
            approval.id, "U_LEAD", "approve", platform=CountingSurface.platform
        )
        assert result.status == "decided", result
        await asyncio.wait_for(resumed.wait(), 10)
        latencies.append((resumed_at[0] - decided) * 1000)
    await manager.wait_idle(50)
    await manager.close()
    return per_run_kb, latencies


async def status_edits(engine: Database) -> int:
    async def step(args: dict[str, Any]) -> ToolResult:
        await asyncio.sleep(0.2)  # simulated tool latency
        return ToolResult("fine")

    tool = Tool(
        name="ops__check",
        description="Check a service",
        parameters={"type": "object", "properties": {"service": {"type": "string"}}},
        invoke=step,
        metadata=policy_metadata(ApprovalPolicy(approval="never")),
    )
    llm = ScriptedLLM("ops__check", steps=10, think_s=0.05)
    manager, _broker, surface = build(engine, llm, tool, 1.0)
    await manager.dispatch(message(RUNS + 1))
    await manager.wait_idle(30)
    await manager.close()
    return sum(surface.edits.values())


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        engine = open_database(f"sqlite:///{Path(tmp) / 'bench.db'}")
        db = Database(engine)
        t0 = time.monotonic()
        per_run_kb, latencies = await pending_approvals(db)
        edits = await status_edits(db)
        db.close()
        engine.dispose()
    cuts = statistics.quantiles(latencies, n=100)
    print(f"bench: memory_per_pending_run = {per_run_kb:.1f} KB")
    print(f"bench: decide_to_resume_p50 = {statistics.median(latencies):.2f} ms")
    print(f"bench: decide_to_resume_p99 = {cuts[98]:.2f} ms")
    print(f"bench: status_edits_per_10_step_run = {edits} edits")
    print(f"bench: pending_approvals_total_time = {time.monotonic() - t0:.1f} s")


if __name__ == "__main__":
    asyncio.run(main())
