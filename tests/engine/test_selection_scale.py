"""Thousands of tools: the selection catalogue fits its budget (cut by a local search, grouped by
connector), and a failed selection never sends more tools than the model accepts. Against
FakeOpenAI, which refuses more than 128 tools and bodies over 1 MiB as the real API does."""

from __future__ import annotations

import dataclasses
import json

import aiohttp

from bot.engine.agent import ReActAgent
from bot.engine.agent_limits import EngineLimits
from bot.engine.tools import ToolRegistry
from tests.engine.helpers import echo_tool
from tests.fakes.fixtures import make_llm
from tests.fakes.openai_server import MAX_TOOLS, FakeOpenAI, answer, tool_call

WANTED = "billing__refund_invoice"


def many_tools(count: int, *, connectors: int = 20) -> ToolRegistry:
    """`count` tools over `connectors` connectors, plus the one a request about refunds needs,
    last, in the `billing` connector under the tag `Invoices`."""
    tools = [
        dataclasses.replace(
            echo_tool(
                f"svc{i % connectors}__op_{i}",
                description=f"Operation {i} of service {i % connectors}",
            ),
            connector=f"svc{i % connectors}",
            action=f"op_{i}",
        )  # fmt: skip
        for i in range(count)
    ]
    wanted = echo_tool(WANTED, description="Refund a paid invoice to the customer")
    tools.append(
        dataclasses.replace(
            wanted, connector="billing", action="refund_invoice", tags=("Invoices", "Payments")
        )  # fmt: skip
    )
    return ToolRegistry(tools)


def prompt_of(body: dict) -> str:
    return body["messages"][0]["content"]


def forced(body: dict) -> str:
    """The name of the function a selection request forces (`select_tool_groups`, ...)."""
    return body["tool_choice"]["function"]["name"]


async def test_six_thousand_tools_are_browsed_by_group_then_picked_within_the_budget(
    fake_openai: FakeOpenAI,
) -> None:
    fake_openai.script(
        tool_call("select_tool_groups", {"groups": ["BILLING/invoices", "nope"]}),
        tool_call("select_tools", {"tools": [WANTED]}),
        answer("done"),
    )
    limits = EngineLimits()
    agent = ReActAgent(make_llm(fake_openai), many_tools(6000), limits=limits)
    result = await agent.run("refund the invoice of ACME")
    assert result.answer == "done" and fake_openai.refused == []
    browse, pick, main = fake_openai.requests
    assert [forced(browse), forced(pick)] == ["select_tool_groups", "select_tools"]
    index = prompt_of(browse)
    assert "There are 6001 tools, too many to list, in 21 groups" in index
    assert "- billing/Invoices (1 tool): refund_invoice" in index
    assert "- svc0 (300 tools): op_0, op_20, op_40" in index
    catalogue = prompt_of(pick)
    assert f"## billing/Invoices\n- {WANTED}: Refund a paid invoice" in catalogue
    assert "svc0" not in catalogue and "not shown" not in catalogue  # only the chosen group
    for body in (browse, pick):  # each selection request within its token budget
        assert len(prompt_of(body)) <= limits.tool_catalogue_max_tokens * 4
    assert [tool["function"]["name"] for tool in main["tools"]] == [WANTED, "request_tools"]
    assert result.usage.prompt_tokens == sum(
        len(json.dumps(body["messages"])) // 4 for body in fake_openai.requests
    )


async def test_the_browse_step_may_search_instead_of_naming_a_group(
    fake_openai: FakeOpenAI,
) -> None:
    fake_openai.script(
        tool_call("select_tool_groups", {"groups": [], "search": "refund payments"}),
        tool_call("select_tools", {"tools": [WANTED]}),
        answer("done"),
    )
    result = await ReActAgent(make_llm(fake_openai), many_tools(6000)).run("money back for ACME")
    assert result.answer == "done"
    catalogue = prompt_of(fake_openai.requests[1])
    assert f"- {WANTED}: Refund a paid invoice" in catalogue  # found by its description and tag


async def test_a_failed_browse_still_picks_from_the_best_ranked_tools_in_the_budget(
    fake_openai: FakeOpenAI,
) -> None:
    """The browse answer is garbage five times: the pick call gets the request's best matches."""
    fake_openai.script(*(answer("groups? no idea") for _ in range(5)),
                       tool_call("select_tools", {"tools": [WANTED]}), answer("done"))  # fmt: skip
    limits = EngineLimits()
    result = await ReActAgent(make_llm(fake_openai), many_tools(6000)).run("refund the invoice")
    assert result.answer == "done" and fake_openai.refused == []
    catalogue = prompt_of(fake_openai.requests[5])
    assert len(catalogue) <= limits.tool_catalogue_max_tokens * 4
    assert catalogue.startswith("Pick the tools") and f"- {WANTED}: Refund" in catalogue
    assert "more tools not shown: they match the request less well" in catalogue


async def test_a_group_index_too_big_for_the_budget_keeps_the_best_groups(
    fake_openai: FakeOpenAI,
) -> None:
    """3,000 connectors of two tools each: even the index of groups is cut, and says so."""
    fake_openai.script(
        tool_call("select_tool_groups", {"groups": ["billing/Invoices"]}),
        tool_call("select_tools", {"tools": [WANTED]}),
        answer("done"),
    )
    limits = EngineLimits(tool_catalogue_max_tokens=2000)
    tools = many_tools(6000, connectors=3000)
    result = await ReActAgent(make_llm(fake_openai), tools, limits=limits).run("refund invoice")
    assert result.answer == "done"
    index = prompt_of(fake_openai.requests[0])
    assert len(index) <= 2000 * 4
    assert "- billing/Invoices (1 tool): refund_invoice" in index  # ranked first
    assert "more groups not shown: they match the request less well" in index


async def test_a_greedy_model_gets_no_more_than_the_limits(fake_openai: FakeOpenAI) -> None:
    """Every group and every tool asked for: 6 groups are opened (the listing still cut to the
    budget) and 6 tools picked; no request is refused."""
    tools = many_tools(6000)
    groups = ["billing/Invoices", *(f"svc{i}" for i in range(20))]
    fake_openai.script(
        tool_call("select_tool_groups", {"groups": groups, "search": "x" * 5000}),
        tool_call("select_tools", {"tools": tools.names()}),
        answer("done"),
    )
    limits = EngineLimits()
    result = await ReActAgent(make_llm(fake_openai), tools, limits=limits).run("refund it all")
    assert result.answer == "done" and fake_openai.refused == []
    browse, pick, main = fake_openai.requests
    catalogue = prompt_of(pick)
    assert len(catalogue) <= limits.tool_catalogue_max_tokens * 4
    assert "## svc5" not in catalogue  # only the first six groups were opened
    assert "more tools not shown" in catalogue  # 5 x 300 tools do not fit: cut
    names = [tool["function"]["name"] for tool in main["tools"]]
    assert len(names) == limits.tool_selection_max + 1 and names[-1] == "request_tools"


async def test_request_tools_adds_what_a_wrong_pick_left_out(fake_openai: FakeOpenAI) -> None:
    """Selection picks a wrong tool; the model asks for a refund tool, gets it, and calls it."""
    wrong = "svc3__op_3"
    fake_openai.script(
        tool_call("select_tool_groups", {"groups": ["svc3"]}),
        tool_call("select_tools", {"tools": [wrong]}),
        tool_call("request_tools", {"query": "refund an invoice"}, id="call_ask"),
        tool_call(WANTED, {"id": "inv-42"}, id="call_refund"),
        answer("refunded"),
    )
    result = await ReActAgent(make_llm(fake_openai), many_tools(3000)).run("refund inv-42")
    assert result.answer == "refunded" and fake_openai.refused == []
    _, _, first, second, third = fake_openai.requests
    offered = [[t["function"]["name"] for t in body["tools"]] for body in (first, second)]
    assert offered[0] == [wrong, "request_tools"]
    assert WANTED in offered[1] and len(offered[1]) <= 2 + EngineLimits().tool_selection_max
    granted = [m["content"] for m in second["messages"] if m["role"] == "tool"][0]
    assert granted.startswith("Added ") and f"- {WANTED}: Refund a paid invoice" in granted
    refund = [m["content"] for m in third["messages"] if m["role"] == "tool"][-1]
    assert "Error" not in refund
    fake_openai.assert_complete()


async def test_request_tools_never_grows_a_request_past_its_schema_budget(
    fake_openai: FakeOpenAI,
) -> None:
    """Asking again and again: each grant stops where the schemas would pass the budget."""
    big = {"type": "object", "properties": {"x": {"type": "string", "description": "y" * 3000}}}
    tools = ToolRegistry(
        dataclasses.replace(
            echo_tool(f"wide__refund_{i}", description="Refund one invoice"),
            parameters=big,
            connector="wide",
        )  # fmt: skip
        for i in range(40)
    )
    limits = EngineLimits(tool_schemas_max_chars=20_000)
    fake_openai.script(
        tool_call("select_tools", {"tools": ["wide__refund_0"]}),
        *(tool_call("request_tools", {"query": "refund invoice"}, id=f"c{i}") for i in range(4)),
        answer("done"),
    )
    result = await ReActAgent(make_llm(fake_openai), tools, limits=limits).run("refund")
    assert result.answer == "done" and fake_openai.refused == []
    for body in fake_openai.requests[1:]:
        sizes = [len(json.dumps(t, separators=(",", ":"))) for t in body["tools"]]
        assert sum(sizes) <= 20_000
    told = [m["content"] for m in fake_openai.requests[-1]["messages"] if m["role"] == "tool"]
    assert told[0].startswith("Added 5 tool(s)")  # 6 x 3 KB fill the 20 KB
    assert "No room for more tools: this run has 7" in told[-1]


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
