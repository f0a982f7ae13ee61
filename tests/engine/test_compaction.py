"""Compaction by the model (DESIGN §2 ContextGuard): one call summarises what older turns
established; pinned messages stay verbatim; drop-and-note only when that call fails.

The fake model stands in for the compaction LLM by copying the lines about incidents out of the
transcript it is sent: a fact can only reach the summary through the request the engine makes.
"""

from __future__ import annotations

import json
import re
from typing import Any

from bot.engine.agent import ReActAgent
from bot.engine.agent_limits import EngineLimits
from bot.engine.interrupts import InterruptQueue
from bot.engine.tools import ToolResult
from tests.engine.helpers import Recorder, echo_tool, is_compaction, registry
from tests.fakes.fixtures import make_llm
from tests.fakes.openai_server import FakeOpenAI, Turn, answer, error, tool_call

FACT = "INC-4711 is owned by kim-ops, root cause: expired TLS certificate on lb-7"
FILLER = "metric sample ok " * 120


def _summarise(body: dict[str, Any]) -> Turn:
    text = body["messages"][1]["content"]
    facts = sorted(set(re.findall(r"INC-\d+[^\n\"]*", text)))
    return answer("Facts established:\n" + "\n".join(facts or ["nothing notable"]))


def _tools(queue: InterruptQueue | None = None):
    async def reply(args: dict[str, Any]) -> ToolResult:
        if args["id"] == "0":
            return ToolResult(f"{FILLER}\n{FACT}\n{FILLER}")
        if args["id"] == "1" and queue is not None:
            queue.put("only look at EU hosts")
        return ToolResult(FILLER)

    return registry(echo_tool("ops__probe", reply=reply))


def _loop_requests(fake: FakeOpenAI) -> list[dict[str, Any]]:
    return [body for body in fake.requests if not is_compaction(body) and not body.get("stream")]


def _texts(body: dict[str, Any], role: str | None = None) -> list[str]:
    return [
        str(m.get("content") or "") for m in body["messages"] if role is None or m["role"] == role
    ]


async def test_a_fact_of_a_compacted_observation_stays_in_the_models_view(
    fake_openai: FakeOpenAI,
) -> None:
    queue = InterruptQueue()
    fake_openai.answer_when(is_compaction, _summarise)
    fake_openai.script(*(tool_call("ops__probe", {"id": str(n)}) for n in range(7)), answer("ok"))
    events = Recorder()
    limits = EngineLimits(context_budget_tokens=1800)
    agent = ReActAgent(make_llm(fake_openai), _tools(queue), limits=limits, completion_check=False)
    result = await agent.run("why is checkout failing?", interrupts=queue, emit=events)
    assert result.answer == "ok"
    compactions = [body for body in fake_openai.requests if is_compaction(body)]
    assert compactions and FACT in compactions[0]["messages"][1]["content"]
    last = _loop_requests(fake_openai)[-1]
    assert not any(FACT in text for text in _texts(last, "tool")), "the observation is gone"
    summaries = [t for t in _texts(last, "user") if t.startswith("[CONTEXT SUMMARY]")]
    assert len(summaries) == 1 and FACT in summaries[0], "yet its fact is in the model's view"
    # pinned messages verbatim: the system prompt, the query, the interrupt
    assert last["messages"][0] == _loop_requests(fake_openai)[0]["messages"][0]
    assert {"role": "user", "content": "why is checkout failing?"} in last["messages"]
    assert any("only look at EU hosts" in text for text in _texts(last, "user"))
    compacts = events.of("compact")
    assert len(compacts) == len(compactions)
    for event in compacts:
        assert event.summarized is True
        assert event.tokens_before > limits.context_budget_tokens > event.tokens_after > 0
        assert event.kept_messages < event.original_messages
    # the compaction calls are paid for by the run (the fake bills len(messages JSON) / 4)
    billed = sum(len(json.dumps(body["messages"])) // 4 for body in fake_openai.requests)
    assert result.usage.prompt_tokens == billed


async def test_the_compaction_call_may_use_a_cheaper_model(fake_openai: FakeOpenAI) -> None:
    fake_openai.answer_when(is_compaction, _summarise)
    fake_openai.script(*(tool_call("ops__probe", {"id": str(n)}) for n in range(5)), answer("ok"))
    agent = ReActAgent(
        make_llm(fake_openai),
        _tools(),
        limits=EngineLimits(context_budget_tokens=1800),
        completion_check=False,
        compact_llm=make_llm(fake_openai, model="cheap-model"),
    )
    await agent.run("q")
    models = {(is_compaction(body), body["model"]) for body in fake_openai.requests}
    assert models == {(True, "cheap-model"), (False, "fake-model")}


async def test_a_failing_compaction_call_falls_back_to_drop_and_note(
    fake_openai: FakeOpenAI,
) -> None:
    fake_openai.answer_when(is_compaction, lambda body: error(500))
    fake_openai.script(*(tool_call("ops__probe", {"id": str(n)}) for n in range(5)), answer("ok"))
    events = Recorder()
    agent = ReActAgent(
        make_llm(fake_openai, max_retries=0),
        _tools(),
        limits=EngineLimits(context_budget_tokens=1800),
        completion_check=False,
    )
    result = await agent.run("q", emit=events)
    assert result.answer == "ok" and result.stopped == "answer"
    assert any(is_compaction(body) for body in fake_openai.requests)
    last = _loop_requests(fake_openai)[-1]
    notes = [t for t in _texts(last, "user") if t.startswith("[CONTEXT COMPACTED]")]
    assert len(notes) == 1 and "ops__probe" in notes[0]
    assert not any("[CONTEXT SUMMARY]" in text for text in _texts(last))
    compacts = events.of("compact")
    assert compacts and all(not event.summarized for event in compacts)
    assert all(event.tokens_after < event.tokens_before for event in compacts)
    fake_openai.assert_complete()


async def test_a_compaction_reply_without_text_falls_back_too(fake_openai: FakeOpenAI) -> None:
    fake_openai.answer_when(is_compaction, lambda body: answer(""))
    fake_openai.script(*(tool_call("ops__probe", {"id": str(n)}) for n in range(5)), answer("ok"))
    events = Recorder()
    agent = ReActAgent(
        make_llm(fake_openai),
        _tools(),
        limits=EngineLimits(context_budget_tokens=1800),
        completion_check=False,
    )
    assert (await agent.run("q", emit=events)).answer == "ok"
    assert events.of("compact") and not any(e.summarized for e in events.of("compact"))
