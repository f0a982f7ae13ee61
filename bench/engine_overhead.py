"""Engine overhead: CPU and wall time per tool iteration against a zero-think-time fake model.

The fake OpenAI server runs in a separate process, so `time.process_time()` here counts only the
engine and the openai SDK (request building, HTTP, JSON), never the server. Two baselines speak
the same protocol in the same run, taking turns with the engine so machine load hits all alike:
a bare loop over the SDK's low-level `post` (what our client uses) and a bare aiohttp loop.
`engine_only_cpu_per_iteration` runs the engine on an in-process model (no HTTP at all).

    .venv/bin/python bench/engine_overhead.py [--iterations 20] [--repetitions 15]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import multiprocessing
import statistics
import sys
import time
import tracemalloc
from collections.abc import AsyncIterator, Awaitable, Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import aiohttp  # noqa: E402
import httpx2  # noqa: E402
import openai  # noqa: E402

from bot.engine.agent import ReActAgent  # noqa: E402
from bot.engine.events import TokenUsage  # noqa: E402
from bot.engine.llm import OpenAICompatibleLLM  # noqa: E402
from bot.engine.llm_replies import LLMResponse, ToolCall  # noqa: E402
from bot.engine.tools import Tool, ToolRegistry, ToolResult  # noqa: E402
from bot.model_http import model_http_client  # noqa: E402
from tests.fakes.openai_server import FakeOpenAI, Turn, answer, tool_call  # noqa: E402

TOOL = "bench__noop"
Post = Callable[[dict[str, Any]], Awaitable[Any]]


def _scripted_reply(iterations: int) -> Callable[[dict[str, Any]], Turn]:
    """Tool calls until the request holds `iterations` tool results, then a final answer."""

    def reply(body: dict[str, Any]) -> Turn:
        done = sum(1 for message in body["messages"] if message.get("role") == "tool")
        if done < iterations:
            return tool_call(TOOL, {"n": done})
        return answer("finished")

    return reply


def _serve(conn: Connection, iterations: int) -> None:
    """Child process: run FakeOpenAI until the parent says stop."""

    async def serve() -> None:
        fake = FakeOpenAI()
        fake.respond_with(_scripted_reply(iterations))
        await fake.start()
        conn.send(fake.base_url)
        await asyncio.get_running_loop().run_in_executor(None, conn.recv)
        await fake.stop()

    asyncio.run(serve())


async def _noop(args: dict[str, Any]) -> ToolResult:
    return ToolResult("ok")


def _tools() -> ToolRegistry:
    parameters = {"type": "object", "properties": {"n": {"type": "integer"}}}
    return ToolRegistry(
        [Tool(name=TOOL, description="Does nothing.", parameters=parameters, invoke=_noop)]
    )


def _agent(base_url: str) -> ReActAgent:
    llm = OpenAICompatibleLLM(
        model="bench", base_url=base_url, api_key="bench", max_retries=0,
        http_client=model_http_client(),  # the transport the bot runs on (bot.model_http)
    )  # fmt: skip
    return ReActAgent(llm, _tools(), completion_check=False)


async def _engine_run(agent: ReActAgent, iterations: int) -> tuple[float, float]:
    gc.collect()
    cpu, wall = time.process_time(), time.perf_counter()
    result = await agent.run("run the bench")
    elapsed = (time.process_time() - cpu, time.perf_counter() - wall)
    assert len(result.steps) == iterations, f"expected {iterations} steps, got {len(result.steps)}"
    return elapsed


async def _bare_loop(post: Post) -> float:
    """The minimum any loop must do: POST the growing messages, parse JSON, append results."""
    gc.collect()
    cpu = time.process_time()
    tools = [{"type": "function", "function": {"name": TOOL, "parameters": {}}}]
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "bench"},
        {"role": "user", "content": "run the bench"},
    ]
    while True:
        data = await post({"model": "bench", "messages": messages, "tools": tools})
        message = data["choices"][0]["message"]
        if not message.get("tool_calls"):
            break
        messages.append(message)
        for call in message["tool_calls"]:
            result = await _noop({})
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": result.content})
    return time.process_time() - cpu


async def _interleaved(base_url: str, iterations: int, repetitions: int) -> dict[str, list[float]]:
    """Engine, SDK loop and aiohttp loop take turns; the first round warms up."""
    agent = _agent(base_url)
    client = openai.AsyncOpenAI(base_url=base_url, api_key="bench", max_retries=0)
    url = f"{base_url}/chat/completions"
    samples: dict[str, list[float]] = {"cpu": [], "wall": [], "sdk": [], "bare": []}
    async with aiohttp.ClientSession() as session:

        async def sdk_post(body: dict[str, Any]) -> Any:
            response = await client.post("/chat/completions", body=body, cast_to=httpx2.Response)
            return response.json()

        async def aiohttp_post(body: dict[str, Any]) -> Any:
            async with session.post(url, json=body) as response:
                return await response.json()

        for rep in range(repetitions + 1):
            cpu, wall = await _engine_run(agent, iterations)
            sdk = await _bare_loop(sdk_post)
            bare = await _bare_loop(aiohttp_post)
            if rep:
                for key, value in (("cpu", cpu), ("wall", wall), ("sdk", sdk), ("bare", bare)):
                    samples[key].append(value)
    await client.close()
    await agent.llm.close()  # type: ignore[attr-defined]
    return samples


class _InProcessLLM:
    """The same script without HTTP: isolates the engine's own CPU from the client's."""

    model = "bench"
    abilities = {"tool_call": True, "json_mode": True}

    def __init__(self, iterations: int) -> None:
        self.iterations = iterations
        self.counter = 0

    async def chat(self, messages: Any, **kwargs: Any) -> LLMResponse:
        done = sum(1 for message in messages if message.get("role") == "tool")
        if done < self.iterations:
            self.counter += 1
            call = ToolCall(id=f"call_{self.counter}", name=TOOL, arguments=f'{{"n": {done}}}')
            return LLMResponse(content=None, tool_calls=(call,), usage=TokenUsage(100, 10))
        return LLMResponse(content="finished", usage=TokenUsage(100, 10))

    async def stream_chat(self, messages: Any) -> AsyncIterator[str]:
        yield "finished"


async def _engine_only(iterations: int, repetitions: int) -> list[float]:
    agent = ReActAgent(_InProcessLLM(iterations), _tools(), completion_check=False)
    await agent.run("warm up")
    samples = []
    for _ in range(repetitions * 4):
        gc.collect()
        cpu = time.process_time()
        await agent.run("run the bench")
        samples.append(time.process_time() - cpu)
    return samples


async def _peak_memory(base_url: str) -> float:
    """Peak Python allocations during one run over HTTP (tracemalloc; measured on its own)."""
    agent = _agent(base_url)
    await agent.run("warm up")
    gc.collect()
    tracemalloc.start()
    await agent.run("run the bench")
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    await agent.llm.close()  # type: ignore[attr-defined]
    return peak / 1e6


async def _measure(base_url: str, iterations: int, repetitions: int) -> None:
    samples = await _interleaved(base_url, iterations, repetitions)
    engine_only = await _engine_only(iterations, repetitions)
    peak = await _peak_memory(base_url)

    def per_iteration(values: list[float]) -> float:
        return statistics.median(values) / iterations * 1000

    cpu_ms, wall_ms = per_iteration(samples["cpu"]), per_iteration(samples["wall"])
    sdk_ms, bare_ms = per_iteration(samples["sdk"]), per_iteration(samples["bare"])
    print(f"bench: engine_iterations_per_run = {iterations} iterations")
    print(f"bench: engine_cpu_per_iteration = {cpu_ms:.3f} ms")
    print(f"bench: engine_wall_per_iteration = {wall_ms:.3f} ms")
    print(f"bench: engine_peak_memory = {peak:.2f} MB")
    print(f"bench: engine_only_cpu_per_iteration = {per_iteration(engine_only):.3f} ms")
    print(f"bench: sdk_lowlevel_loop_cpu_per_iteration = {sdk_ms:.3f} ms")
    print(f"bench: bare_loop_cpu_per_iteration = {bare_ms:.3f} ms")
    print(f"bench: engine_cpu_ratio_to_sdk_lowlevel_loop = {cpu_ms / sdk_ms:.2f} x")
    print(f"bench: engine_cpu_ratio_to_bare_loop = {cpu_ms / bare_ms:.2f} x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--repetitions", type=int, default=15)
    args = parser.parse_args()
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    server = ctx.Process(target=_serve, args=(child, args.iterations), daemon=True)
    server.start()
    try:
        if not parent.poll(30):
            raise SystemExit("the fake OpenAI server did not start within 30 s")
        asyncio.run(_measure(parent.recv(), args.iterations, args.repetitions))
    finally:
        parent.send("stop")
        server.join(10)
        if server.is_alive():
            server.terminate()
            server.join()


if __name__ == "__main__":
    main()
