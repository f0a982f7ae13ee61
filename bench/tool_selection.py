"""Tool selection over thousands of imported actions: each model request's size, tools and CPU.

Imports PagerDuty's published OpenAPI document (tests/data, 464 actions) with the importer the
CLI uses, writes copies of it under other connector names until there are `--actions` actions
(default 6,000: 13 copies, 6,032), loads them with `ConnectorSet.load` as the bot does, and
runs the engine (`ReActAgent.run`) against FakeOpenAI, `--rounds` times each way:
- picked: the model browses the group index, opens `pd7/Incidents`, picks `list_incidents`;
- failed: the model never answers a selection call properly (the fallback).
Prints, as FakeOpenAI received them: each selection request's size (bytes and an estimate of
its tokens, at 4 bytes a token), the most tools and bytes of any request, the calls the
selection took, what the whole catalogue would have been (the selection before issue 32 sent
it all, and a failed one sent every tool), and the CPU time of the selection step (the fake
model runs in the same process: its share is in the figure) and of building the catalogues.

    python bench/tool_selection.py [--actions 6000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import lzma
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.engine import prompts  # noqa: E402
from bot.engine.agent import ReActAgent  # noqa: E402
from bot.engine.agent_limits import EngineLimits  # noqa: E402
from bot.engine.catalogue import group_index, groups_of, tool_line, tool_listing  # noqa: E402
from bot.engine.selection import catalogue_room, schema_chars  # noqa: E402
from bot.engine.tool_search import rank, rank_groups  # noqa: E402
from connectors.connector_set import ConnectorSet  # noqa: E402
from connectors.http import client_session  # noqa: E402
from connectors.loading import YAML_DUMPER  # noqa: E402
from connectors.openapi import manifest_from_openapi  # noqa: E402
from tests.fakes.fixtures import make_llm  # noqa: E402
from tests.fakes.openai_server import FakeOpenAI, Turn, answer, tool_call  # noqa: E402
from tests.fakes.serving import started  # noqa: E402

SPEC = Path(__file__).resolve().parents[1] / "tests" / "data" / "pagerduty-rest-openapiv3.json.xz"
QUERY = "which pd7 incidents are triggered?"
WANTED = "pd7__list_incidents"


def manifests(directory: Path, actions: int) -> None:
    """Copies of the PagerDuty import, `pd0`, `pd1`, ..., until there are `actions` actions."""
    doc = json.loads(lzma.decompress(SPEC.read_bytes()))
    manifest, _ = manifest_from_openapi(doc, "pd", base_url="http://127.0.0.1:9")
    per_copy = len(manifest["actions"])
    for copy in range(-(-actions // per_copy)):
        text = yaml.dump({**manifest, "name": f"pd{copy}"}, Dumper=YAML_DUMPER, sort_keys=False)
        (directory / f"pd{copy}.yaml").write_text(text)


def forced(body: dict[str, Any]) -> str:
    """The selection step a request is for ('' for the loop's own requests): the function it
    forces, or `json_mode` for a structured call's JSON-mode retry."""
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        return choice["function"]["name"]
    return "json_mode" if body.get("response_format") else ""


def picking(body: dict[str, Any]) -> Turn:
    if forced(body) == "select_tool_groups":
        return tool_call("select_tool_groups", {"groups": ["pd7/Incidents"]})
    if forced(body) == "select_tools":
        return tool_call("select_tools", {"tools": [WANTED]})
    return answer("done")


def failing(body: dict[str, Any]) -> Turn:
    return answer("I would rather not choose." if forced(body) else "done")


async def rounds(fake: FakeOpenAI, agent: ReActAgent, rounds: int) -> tuple[list, list]:
    """CPU ms of each run (selection and one loop call), and the requests of the last."""
    cpu: list[float] = []
    for _ in range(rounds):
        fake.requests.clear()
        fake.request_bytes.clear()
        began = time.process_time()
        result = await agent.run(QUERY)
        cpu.append((time.process_time() - began) * 1000)
        assert result.answer == "done" and fake.refused == [], fake.refused
    return cpu, list(zip(fake.requests, fake.request_bytes, strict=True))


def report(label: str, cpu: list[float], requests: list) -> None:
    selection = [(body, size) for body, size in requests if forced(body)]
    loop = [(body, size) for body, size in requests if not forced(body)]
    print(f"bench: tool_selection_{label}_calls = {len(selection)} calls")
    largest: dict[str, int] = {}
    for body, size in selection:
        largest[forced(body)] = max(size, largest.get(forced(body), 0))
    for step, size in largest.items():
        print(f"bench: tool_selection_{label}_{step}_request_bytes = {size} bytes")
        print(f"bench: tool_selection_{label}_{step}_request_tokens = {size // 4} tokens (approx)")
    print(f"bench: tool_selection_{label}_max_request_bytes = "
          f"{max(size for _, size in requests)} bytes")  # fmt: skip
    tools = max(len(body.get("tools") or []) for body, _ in loop)
    print(f"bench: tool_selection_{label}_tools_per_request = {tools} tools")
    print(f"bench: tool_selection_{label}_run_cpu = {statistics.median(cpu):.1f} ms "
          "(selection and one loop call, the fake model in the same process)")  # fmt: skip


async def measure(actions: int, count: int) -> None:
    limits = EngineLimits()
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        manifests(directory, actions)
        async with client_session() as http, started(FakeOpenAI()) as fake:
            began = time.process_time()
            connectors = await ConnectorSet.load(directory, http=http, environ={"PD_API_KEY": "k"})
            loading = time.process_time() - began
            tools = connectors.tools
            llm = make_llm(fake)
            agent = ReActAgent(llm, tools, limits=limits, completion_check=False)
            fake.respond_with(picking)
            picked = await rounds(fake, agent, count)
            fake.respond_with(failing)
            failed = await rounds(fake, agent, count)
            building: list[float] = []
            for _ in range(count):
                began = time.process_time()
                groups = groups_of(tools)
                room = catalogue_room(prompts.BROWSE_PROMPT, QUERY, limits)
                group_index(groups, rank_groups(QUERY, groups), room)
                listed = list(tools)
                tool_listing(listed, rank(QUERY, listed), room)
                building.append((time.process_time() - began) * 1000)
            whole = "\n".join(tool_line(tool) for tool in tools).encode()
            schemas = sum(schema_chars(tool) for tool in tools)
            await connectors.close()
            await llm.close()
    print(f"bench: tool_selection_tools = {len(tools)} tools")
    print(f"bench: tool_selection_groups = {len(groups_of(tools))} groups (connector/tag)")
    print(f"bench: tool_selection_load_cpu = {loading:.1f} s (ConnectorSet.load)")
    print(f"bench: tool_selection_budget = {limits.tool_catalogue_max_tokens} tokens per request")
    print(f"bench: tool_selection_whole_catalogue_bytes = {len(whole)} bytes (before: all sent)")
    print(f"bench: tool_selection_every_tool_schema_chars = {schemas} chars (before, on failure)")
    report("picked", *picked)
    report("failed", *failed)
    print(f"bench: tool_selection_catalogue_cpu = {statistics.median(building):.1f} ms "
          "(group index and cut listing over every tool)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--actions", type=int, default=6000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    asyncio.run(measure(args.actions, args.rounds))


if __name__ == "__main__":
    main()
