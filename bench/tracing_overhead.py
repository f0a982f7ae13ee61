"""Tracing overhead: the engine's own CPU per tool iteration with traces off and on.

The engine runs on the in-process model of `bench/engine_overhead.py` (no HTTP), so the figure
is what tracing adds to each iteration: a "model.chat" span around the completion and a
"tool.call" span after the call, inside a "run" span, exported by the runtime's batch processor
(to an in-memory exporter here: the OTLP encoding and POST happen on the exporter's thread,
off the event loop). Off and on take turns, so machine load hits both alike.

    .venv/bin/python bench/tracing_overhead.py [--iterations 20] [--repetitions 30]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)

from bench.engine_overhead import _InProcessLLM, _tools  # noqa: E402
from bot.engine.agent import ReActAgent  # noqa: E402
from bot.engine.hooks import HookRegistry  # noqa: E402
from bot.observability.trace_config import TraceConfig  # noqa: E402
from bot.observability.traced_llm import TracedLLM  # noqa: E402
from bot.observability.tracing import Tracing  # noqa: E402
from hooks.tracing import ToolSpanHook  # noqa: E402


def _agents(iterations: int, tracing: Tracing) -> tuple[ReActAgent, ReActAgent]:
    off = ReActAgent(_InProcessLLM(iterations), _tools(), completion_check=False)
    hooks = HookRegistry()
    hooks.add_post(ToolSpanHook(tracing.tracer), name="trace_tool")
    on = ReActAgent(
        TracedLLM(_InProcessLLM(iterations), tracing.tracer), _tools(), hooks=hooks,
        completion_check=False,
    )  # fmt: skip
    return off, on


async def _cpu(agent: ReActAgent, tracing: Tracing | None) -> float:
    gc.collect()
    cpu = time.process_time()
    if tracing is None:
        await agent.run("run the bench")
    else:
        with tracing.run_span(run_id="r", conversation_id=1, platform="bench", trace_parent=None):
            await agent.run("run the bench")
    return time.process_time() - cpu


async def _measure(iterations: int, repetitions: int) -> None:
    exporter = InMemorySpanExporter()
    tracing = Tracing.start(TraceConfig(enabled=True), exporter=exporter)
    off, on = _agents(iterations, tracing)
    samples: dict[str, list[float]] = {"off": [], "on": []}
    for rep in range(repetitions + 1):  # the first round warms up
        cpu_off, cpu_on = await _cpu(off, None), await _cpu(on, tracing)
        if rep:
            samples["off"].append(cpu_off)
            samples["on"].append(cpu_on)
    await asyncio.to_thread(tracing.shutdown)
    spans = len(exporter.get_finished_spans())
    off_ms = statistics.median(samples["off"]) / iterations * 1000
    on_ms = statistics.median(samples["on"]) / iterations * 1000
    print(f"bench: tracing_spans_exported = {spans} spans")
    print(f"bench: engine_cpu_per_iteration_traces_off = {off_ms:.3f} ms")
    print(f"bench: engine_cpu_per_iteration_traces_on = {on_ms:.3f} ms")
    print(f"bench: tracing_cpu_per_iteration = {on_ms - off_ms:.3f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--repetitions", type=int, default=30)
    args = parser.parse_args()
    asyncio.run(_measure(args.iterations, args.repetitions))


if __name__ == "__main__":
    main()
