"""Thousands of tools: the selection catalogue fits its budget (cut by a local search, grouped by
connector), and a failed selection never sends more tools than the model accepts. Against
FakeOpenAI, which refuses more than 128 tools and bodies over 1 MiB as the real API does."""

from __future__ import annotations

import dataclasses

import aiohttp

from bot.engine.agent import ReActAgent
from bot.engine.agent_limits import EngineLimits
from bot.engine.tools import ToolRegistry
from tests.engine.helpers import echo_tool
from tests.fakes.fixtures import make_llm
from tests.fakes.openai_server import MAX_TOOLS, FakeOpenAI, answer, tool_call

WANTED = "billing__refund_invoice"


def many_tools(count: int) -> ToolRegistry:
    """`count` tools over 20 connectors, plus the one a request about refunds needs, last."""
    tools = [
        dataclasses.replace(
            echo_tool(f"svc{i % 20}__op_{i}", description=f"Operation {i} of service {i % 20}"),
            connector=f"svc{i % 20}",
        )
        for i in range(count)
    ]
    wanted = echo_tool(WANTED, description="Refund a paid invoice to the customer")
    tools.append(dataclasses.replace(wanted, connector="billing"))
    return ToolRegistry(tools)


async def test_six_thousand_tools_fit_the_catalogue_budget_and_the_pick_is_offered(
    fake_openai: FakeOpenAI,
) -> None:
    fake_openai.script(tool_call("select_tools", {"tools": [WANTED]}), answer("done"))
    limits = EngineLimits()
    agent = ReActAgent(make_llm(fake_openai), many_tools(6000), limits=limits)
    result = await agent.run("refund the invoice of ACME")
    assert result.answer == "done" and fake_openai.refused == []
    selection, main = fake_openai.requests
    catalogue = selection["messages"][0]["content"]
    assert len(catalogue) < limits.tool_catalogue_max_chars + 1000  # the prompt around it
    assert f"## billing\n- {WANTED}: Refund a paid invoice" in catalogue
    assert "more tools not shown" in catalogue
    assert [tool["function"]["name"] for tool in main["tools"]] == [WANTED, "request_tools"]


async def test_request_tools_adds_what_a_wrong_pick_left_out(fake_openai: FakeOpenAI) -> None:
    """Selection picks a wrong tool; the model asks for a refund tool, gets it, and calls it."""
    wrong = "svc3__op_3"
    fake_openai.script(
        tool_call("select_tools", {"tools": [wrong]}),
        tool_call("request_tools", {"query": "refund an invoice"}, id="call_ask"),
        tool_call(WANTED, {"id": "inv-42"}, id="call_refund"),
        answer("refunded"),
    )
    result = await ReActAgent(make_llm(fake_openai), many_tools(3000)).run("refund inv-42")
    assert result.answer == "refunded" and fake_openai.refused == []
    _, first, second, third = fake_openai.requests
    offered = [[t["function"]["name"] for t in body["tools"]] for body in (first, second)]
    assert offered[0] == [wrong, "request_tools"]
    assert WANTED in offered[1] and len(offered[1]) <= 2 + EngineLimits().tool_selection_max
    granted = [m["content"] for m in second["messages"] if m["role"] == "tool"][0]
    assert granted.startswith("Added ") and f"- {WANTED}: Refund a paid invoice" in granted
    refund = [m["content"] for m in third["messages"] if m["role"] == "tool"][-1]
    assert "Error" not in refund
    fake_openai.assert_complete()


async def test_a_failed_selection_sends_at_most_128_tools_the_best_ranked_among_them(
    fake_openai: FakeOpenAI,
) -> None:
    fake_openai.script(*(answer("all of them!") for _ in range(5)), answer("done"))
    agent = ReActAgent(make_llm(fake_openai), many_tools(400))
    result = await agent.run("refund the invoice of ACME")
    assert result.answer == "done" and fake_openai.refused == []
    names = [tool["function"]["name"] for tool in fake_openai.requests[-1]["tools"]]
    assert len(names) == MAX_TOOLS and names[-1] == "request_tools"
    assert WANTED in names  # ranked first by the words it shares with the request


async def test_few_tools_with_huge_schemas_are_cut_to_the_schema_budget(
    fake_openai: FakeOpenAI,
) -> None:
    """Ten tools need no selection by count, but 10 x 40 KB of schema would be refused."""
    big = {"type": "object", "properties": {f"p{i}": {"type": "string", "description": "x" * 400}
                                            for i in range(100)}}  # fmt: skip
    tools = ToolRegistry(
        dataclasses.replace(echo_tool(f"wide__op{i}"), parameters=big) for i in range(10)
    )
    fake_openai.script(*(answer("?") for _ in range(5)), answer("done"))
    limits = EngineLimits(tool_schemas_max_chars=150_000)
    result = await ReActAgent(make_llm(fake_openai), tools, limits=limits).run("q")
    assert result.answer == "done" and fake_openai.refused == []
    assert 0 < len(fake_openai.requests[-1]["tools"]) < 10


async def test_the_fake_refuses_what_the_real_api_refuses(fake_openai: FakeOpenAI) -> None:
    tool = {"type": "function", "function": {"name": "t", "parameters": {"type": "object"}}}
    body = {"model": "fake-model", "messages": [{"role": "user", "content": "q"}]}
    async with aiohttp.ClientSession() as http:
        url = f"{fake_openai.base_url}/chat/completions"
        async with http.post(url, json={**body, "tools": [tool] * (MAX_TOOLS + 1)}) as response:
            assert response.status == 400
            assert "array too long" in (await response.json())["error"]["message"]
        huge = {**body, "messages": [{"role": "user", "content": "x" * (1024 * 1024 + 1)}]}
        async with http.post(url, json=huge) as response:
            assert response.status == 413
    assert [status for status, _ in fake_openai.refused] == [400, 413]
