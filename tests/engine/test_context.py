"""ContextGuard: estimate without a tokenizer, compact older turns, keep pinned and pairs.

The unit tests drive the run's own path (`bot.engine.scope`): `ContextGuard.plan`, then
`compaction.compact`, whose model call fails here, so the drop-and-note stands in for the
summary and the outcome depends on the plan alone."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

from bot.engine.agent import ReActAgent
from bot.engine.agent_limits import EngineLimits
from bot.engine.compaction import compact
from bot.engine.context import Compaction, ContextGuard, estimate_tokens
from bot.engine.interrupts import InterruptQueue
from bot.engine.llm import LLMError, LLMResponse
from bot.engine.tools import ToolResult
from tests.engine.helpers import Recorder, echo_tool, is_compaction, registry
from tests.fakes.fixtures import make_llm
from tests.fakes.openai_server import FakeOpenAI, answer, tool_call


def _tool_turn(n: int, size: int = 400) -> list[dict[str, Any]]:
    call = {"id": f"c{n}", "type": "function", "function": {"name": "t", "arguments": "{}"}}
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"c{n}", "content": "x" * size},
    ]


class DownLLM:
    """A compaction model that is down: every call fails as the client reports an outage."""

    model = "down"
    abilities: dict[str, bool] = {}

    async def chat(self, messages: Sequence[dict[str, Any]], **_: Any) -> LLMResponse:
        raise LLMError("compaction model unreachable")

    async def stream_chat(self, messages: Sequence[dict[str, Any]]) -> AsyncIterator[str]:
        raise LLMError("compaction model unreachable")
        yield ""  # pragma: no cover - makes this an async generator


async def _compacted(
    guard: ContextGuard, messages: list[dict[str, Any]], pinned: set[int]
) -> Compaction | None:
    """What a run does when over budget: plan, then compact (the drop-and-note here)."""
    plan = guard.plan(messages, pinned)
    if plan is None:
        return None
    outcome = await compact(DownLLM(), plan, query="q", budget_tokens=guard.budget_tokens)
    assert not outcome.summarized
    return outcome.compaction


def _assert_pairs_intact(messages: list[dict[str, Any]]) -> None:
    """Every tool message follows an assistant message (or a tool) whose calls include its id."""
    open_ids: set[str] = set()
    for message in messages:
        if message["role"] == "tool":
            assert message["tool_call_id"] in open_ids, "a tool result lost its tool_calls message"
        elif message["role"] == "assistant" and message.get("tool_calls"):
            open_ids = {call["id"] for call in message["tool_calls"]}
        else:
            open_ids = set()


async def test_within_budget_nothing_happens() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "q"},
    ]
    assert await _compacted(ContextGuard(1000), messages, {0, 1}) is None


async def test_compaction_keeps_system_pinned_and_recent_turns() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "the query"},
    ]
    for n in range(10):
        messages += _tool_turn(n)
        if n == 2:
            messages.append({"role": "user", "content": "[USER INTERRUPT] keep me"})
    pinned = {0, 1, 8}
    assert messages[8]["content"].startswith("[USER INTERRUPT]")
    guard = ContextGuard(estimate_tokens(messages) // 2)
    result = await _compacted(guard, messages, pinned)
    assert result is not None
    kept = result.messages
    assert kept[0]["content"] == "sys" and kept[1]["content"] == "the query"
    assert [kept[i]["content"] for i in sorted(result.pinned)] == [
        "sys",
        "the query",
        "[USER INTERRUPT] keep me",
    ]
    assert kept[-1] == messages[-1] and kept[-2] == messages[-2]
    assert any("[CONTEXT COMPACTED]" in str(m["content"]) for m in kept)
    assert len(kept) < len(messages)
    assert estimate_tokens(kept) <= guard.budget_tokens
    _assert_pairs_intact(kept)


def test_estimate_uses_reported_usage() -> None:
    messages = [{"role": "user", "content": "x" * 40}]
    guard = ContextGuard(1000)
    assert guard.estimate(messages) == 14
    guard.note_usage(1, 500)
    assert guard.estimate([*messages, {"role": "user", "content": "y" * 40}]) == 514


async def test_loop_compacts_and_never_drops_pinned(fake_openai: FakeOpenAI) -> None:
    queue = InterruptQueue()
    big = "row " * 500

    async def reply(args: dict[str, Any]) -> ToolResult:
        if args["id"] == "1":
            queue.put("only look at EU hosts")
        return ToolResult(big)

    tools = registry(echo_tool("db__rows", reply=reply))
    fake_openai.answer_when(is_compaction, lambda body: answer("rows were counted"))
    fake_openai.script(*(tool_call("db__rows", {"id": str(n)}) for n in range(8)), answer("done"))
    events = Recorder()
    limits = EngineLimits(context_budget_tokens=2500)
    agent = ReActAgent(make_llm(fake_openai), tools, limits=limits, completion_check=False)
    result = await agent.run("count the rows", interrupts=queue, emit=events)
    assert result.answer == "done"
    compacts = events.of("compact")
    assert compacts and all(c.kept_messages < c.original_messages for c in compacts)
    last = [body for body in fake_openai.requests if not is_compaction(body)][-1]["messages"]
    assert last[0]["role"] == "system"
    assert {"role": "user", "content": "count the rows"} in last
    assert any(m["content"] and "only look at EU hosts" in m["content"] for m in last)
    assert any("[CONTEXT SUMMARY]" in (m["content"] or "") for m in last)
    for body in fake_openai.requests:
        _assert_pairs_intact(body["messages"])
    assert sum(m["role"] == "tool" for m in last) < 8  # older results were compacted away


async def test_compaction_never_splits_a_call_from_its_results_at_any_budget() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "q"},
    ]
    for n in range(6):
        calls = [
            {"id": f"c{n}{k}", "type": "function",
             "function": {"name": "t", "arguments": '{"q": "' + "a" * 300 + '"}'}}
            for k in range(2)
        ]  # fmt: skip
        messages.append({"role": "assistant", "content": None, "tool_calls": calls})
        messages += [{"role": "tool", "tool_call_id": c["id"], "content": "ok"} for c in calls]
    total = estimate_tokens(messages)
    compacted = 0
    for budget in range(40, total, 7):
        result = await _compacted(ContextGuard(budget), messages, {0, 1})
        if result is None:
            continue
        compacted += 1
        _assert_pairs_intact(result.messages)
        assert result.messages[-3:] == messages[-3:]
    assert compacted > 10
