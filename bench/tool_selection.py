"""Tool selection over thousands of imported actions: each model request's size, tools and CPU.

Imports a published OpenAPI document from tests/data with the importer the CLI uses
(`--spec pagerduty`, the default: PagerDuty's, 464 actions; `--spec github`: GitHub's REST
description, 1,223 actions), writes copies of it under other connector names until there are
`--actions` actions (default 6,000: 13 copies of PagerDuty's, 6,032; 5 of GitHub's, 6,115),
loads them with `ConnectorSet.load` as the bot does, and runs the engine (`ReActAgent.run`)
against FakeOpenAI, `--rounds` times each way:
- picked: the model browses the group index, opens one copy's group (`pd7/Incidents`, or
  `gh4/issues` for GitHub's: the eighth copy or the last) and picks one action in it
  (`list_incidents`, `issues_list_for_repo`);
- failed: the model never answers a selection call properly (the fallback).
Prints, as FakeOpenAI received them: each selection request's size (bytes and an estimate of
its tokens, at 4 bytes a token), the most tools and bytes of any request, the calls the
selection took, what the whole catalogue would have been (the selection before issue 32 sent
it all, and a failed one sent every tool), and the CPU time of the selection step (the fake
model runs in the same process: its share is in the figure) and of building the catalogues.

    python bench/tool_selection.py [--spec pagerduty|github] [--actions 6000] [--rounds 5]
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
from dataclasses import dataclass
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

DATA = Path(__file__).resolve().parents[1] / "tests" / "data"


@dataclass(frozen=True)
class Source:
    """A published document the bench copies, and what the picking model asks for in it."""

    spec: Path
    prefix: str
    tag: str
    action: str
    question: str  # "{connector}" stands for the copy the question is about


MAX_COPIES = 100

SOURCES = {
    "pagerduty": Source(DATA / "pagerduty-rest-openapiv3.json.xz", "pd", "Incidents",
                        "list_incidents", "which {connector} incidents are triggered?"),
    "github": Source(DATA / "github-api.github.com.json.xz", "gh", "issues",
                     "issues_list_for_repo", "which {connector} issues are open in acme/ops?"),
}  # fmt: skip


@dataclass(frozen=True)
class Target:
    """The copy, group and tool a picking model chooses, and the user's question."""

    query: str
    group: str
    wanted: str


def manifests(directory: Path, actions: int, source: Source) -> Target:
    """Copies of the import of `source`, `pd0`, `pd1`, ... (its prefix), until there are
    `actions` actions; the eighth copy (or the last) is the one the question is about."""
    doc = json.loads(lzma.decompress(source.spec.read_bytes()))
    # imported under the longest copy name (`pd99`): the import shortens action names so that
    # `<connector>__<action>` fits a function name, and every copy must fit
    longest = f"{source.prefix}{MAX_COPIES - 1}"
    manifest, _ = manifest_from_openapi(doc, longest, base_url="http://127.0.0.1:9")
    per_copy = len(manifest["actions"])
    copies = -(-actions // per_copy)
    if copies > MAX_COPIES:
        raise SystemExit(f"--actions {actions} needs {copies} copies; at most {MAX_COPIES}")
    for copy in range(copies):
        name = f"{source.prefix}{copy}"
        text = yaml.dump({**manifest, "name": name}, Dumper=YAML_DUMPER, sort_keys=False)
        (directory / f"{name}.yaml").write_text(text)
    connector = f"{source.prefix}{min(7, copies - 1)}"
    return Target(
        query=source.question.format(connector=connector),
        group=f"{connector}/{source.tag}",
        wanted=f"{connector}__{source.action}",
    )


def forced(body: dict[str, Any]) -> str:
    """The selection step a request is for ('' for the loop's own requests): the function it
    forces, or `json_mode` for a structured call's JSON-mode retry."""
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        return choice["function"]["name"]
    return "json_mode" if body.get("response_format") else ""


def picking(target: Target) -> Any:
    """The fake model's answers when it picks `target`'s group, then its tool."""

    def respond(body: dict[str, Any]) -> Turn:
        if forced(body) == "select_tool_groups":
            return tool_call("select_tool_groups", {"groups": [target.group]})
        if forced(body) == "select_tools":
            return tool_call("select_tools", {"tools": [target.wanted]})
        return answer("done")

    return respond


def failing(body: dict[str, Any]) -> Turn:
    return answer("I would rather not choose." if forced(body) else "done")


async def rounds(fake: FakeOpenAI, agent: ReActAgent, query: str, rounds: int) -> tuple[list, list]:
    """CPU ms of each run (selection and one loop call), and the requests of the last."""
    cpu: list[float] = []
    for _ in range(rounds):
        fake.requests.clear()
        fake.request_bytes.clear()
        began = time.process_time()
        result = await agent.run(query)
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


async def measure(actions: int, count: int, source: Source) -> None:
    limits = EngineLimits()
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        target = manifests(directory, actions, source)
        async with client_session() as http, started(FakeOpenAI()) as fake:
            began = time.process_time()
            connectors = await ConnectorSet.load(directory, http=http, environ={"PD_API_KEY": "k"})
            loading = time.process_time() - began
            tools = connectors.tools
            llm = make_llm(fake)
            agent = ReActAgent(llm, tools, limits=limits, completion_check=False)
            fake.respond_with(picking(target))
            picked = await rounds(fake, agent, target.query, count)
            fake.respond_with(failing)
            failed = await rounds(fake, agent, target.query, count)
            building: list[float] = []
            for _ in range(count):
                began = time.process_time()
                groups = groups_of(tools)
                room = catalogue_room(prompts.BROWSE_PROMPT, target.query, limits)
                group_index(groups, rank_groups(target.query, groups), room)
                listed = list(tools)
                tool_listing(listed, rank(target.query, listed), room)
                building.append((time.process_time() - began) * 1000)
            whole = "\n".join(tool_line(tool) for tool in tools).encode()
            schemas = sum(schema_chars(tool) for tool in tools)
            await connectors.close()
            await llm.close()
    print(f"bench: tool_selection_spec = {source.spec.name}")
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
    parser.add_argument("--spec", choices=sorted(SOURCES), default="pagerduty")
    parser.add_argument("--actions", type=int, default=6000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    asyncio.run(measure(args.actions, args.rounds, SOURCES[args.spec]))


if __name__ == "__main__":
    main()
