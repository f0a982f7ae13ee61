"""An interrupt holds back a final answer only while iterations remain (seed rule, DESIGN §2).

On the last iteration the model's final answer is kept (the loop has no turn left to answer the
interrupt), and the reply still reaches the synthesis, which says whether the answer covers it.
With iterations left the answer is suppressed as before. Native and JSON modes, against the fake
OpenAI server.
"""

from __future__ import annotations

from typing import Any

from bot.engine.agent import ReActAgent
from bot.engine.agent_limits import EngineLimits
from bot.engine.interrupts import InterruptQueue
from tests.engine.helpers import echo_tool, registry
from tests.fakes.fixtures import make_llm
from tests.fakes.openai_server import (
    FakeOpenAI,
    Turn,
    answer,
    json_action_call,
    json_final,
    tool_call,
)

PLAIN: dict[str, bool] = {}  # no tool calling: JSON mode
LATE = "also restart the cache"


def _interrupt_on(fake: FakeOpenAI, queue: InterruptQueue, turns: list[Turn], at: int) -> None:
    """Script the loop's `turns`; the reply arrives while the model writes turn `at` (1-based),
    then the synthesis answers "synthesised"."""

    def reply(body: dict[str, Any]) -> Turn:
        n = len(fake.requests)
        if n == at:
            queue.put(LATE, author="U0LATE")
        return turns[n - 1] if n <= len(turns) else answer("synthesised")

    fake.respond_with(reply)


async def _run(fake: FakeOpenAI, *, json_mode: bool, turns: list[Turn], at: int, iterations: int):
    queue = InterruptQueue()
    _interrupt_on(fake, queue, turns, at)
    agent = ReActAgent(
        make_llm(fake, abilities=PLAIN if json_mode else None),
        registry(echo_tool("ops__check", reply="all green")),
        limits=EngineLimits(max_iterations=iterations),
        completion_check=False,
    )
    result = await agent.run("is the api healthy?", interrupts=queue)
    return agent, result


async def _synthesis_prompt(fake: FakeOpenAI, agent: ReActAgent, result: Any) -> str:
    await agent.synthesize(result)
    return str(fake.streamed_requests()[-1]["messages"][1]["content"])


async def test_native_answer_on_the_last_iteration_is_kept(fake_openai: FakeOpenAI) -> None:
    turns = [tool_call("ops__check", {"id": "api"}), answer("The api is healthy.")]
    agent, result = await _run(fake_openai, json_mode=False, turns=turns, at=2, iterations=2)
    assert result.stopped == "answer"
    assert result.answer == "The api is healthy."
    assert result.late_interrupts == [LATE]
    prompt = await _synthesis_prompt(fake_openai, agent, result)
    assert "The api is healthy." in prompt and LATE in prompt and "no step was left" in prompt


async def test_json_answer_on_the_last_iteration_is_kept(fake_openai: FakeOpenAI) -> None:
    turns = [json_action_call("ops__check", {"id": "api"}), json_final("The api is healthy.")]
    agent, result = await _run(fake_openai, json_mode=True, turns=turns, at=2, iterations=2)
    assert result.stopped == "answer"
    assert result.answer == "The api is healthy."
    assert result.late_interrupts == [LATE]
    prompt = await _synthesis_prompt(fake_openai, agent, result)
    assert LATE in prompt


async def test_a_one_iteration_run_keeps_its_answer(fake_openai: FakeOpenAI) -> None:
    _, result = await _run(
        fake_openai, json_mode=False, turns=[answer("Healthy.")], at=1, iterations=1
    )
    assert (result.stopped, result.answer, result.iterations) == ("answer", "Healthy.", 1)


async def test_native_interrupt_with_iterations_left_still_suppresses(
    fake_openai: FakeOpenAI,
) -> None:
    turns = [answer("The api is healthy."), answer("Healthy, and the cache restarted.")]
    agent, result = await _run(fake_openai, json_mode=False, turns=turns, at=1, iterations=2)
    assert result.answer == "Healthy, and the cache restarted."
    assert result.late_interrupts == []
    assert result.iterations == 2
    prompt = await _synthesis_prompt(fake_openai, agent, result)
    assert "no step was left" not in prompt


async def test_json_interrupt_with_iterations_left_still_suppresses(
    fake_openai: FakeOpenAI,
) -> None:
    turns = [json_final("The api is healthy."), json_final("Healthy, and the cache restarted.")]
    _, result = await _run(fake_openai, json_mode=True, turns=turns, at=1, iterations=2)
    assert result.answer == "Healthy, and the cache restarted."
    assert result.late_interrupts == []
