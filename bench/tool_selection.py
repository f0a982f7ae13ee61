"""Tool selection over thousands of imported actions: the selection request's size and CPU.

Generates an HTTP manifest of `--actions` actions (default 6,000) over 30 connectors, as
`chatops manifests import-openapi` writes them (one line of description, a path parameter, a
query parameter), loads it with `ConnectorSet.load` as the bot does, and runs the engine's
selection (`bot.engine.selection.select_tools`) against FakeOpenAI, which answers with one
tool. Prints the size of the selection request as sent (its JSON body), the catalogue's share,
what the whole catalogue would have been (the selection before issue 32 sent it all), and the
CPU time of building the catalogue and of the whole selection step (the fake model runs in the
same process: its share is in the second figure).

    python bench/tool_selection.py [--actions 6000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.engine.agent_limits import EngineLimits  # noqa: E402
from bot.engine.selection import catalogue, select_tools  # noqa: E402
from connectors.connector_set import ConnectorSet  # noqa: E402
from connectors.http import client_session  # noqa: E402
from tests.fakes.fixtures import make_llm  # noqa: E402
from tests.fakes.openai_server import FakeOpenAI, tool_call  # noqa: E402
from tests.fakes.serving import started  # noqa: E402

CONNECTORS = 30
VERBS = ("list", "get", "create", "update", "delete", "search", "archive", "restore")
NOUNS = ("issue", "repository", "invoice", "customer", "deployment", "pod", "alert", "ticket",
         "user", "team", "webhook", "secret", "release", "pipeline", "dashboard")  # fmt: skip
QUERY = "restore the archived issue 42 of connector c7"


def manifests(directory: Path, actions: int) -> None:
    for c in range(CONNECTORS):
        entries: list[dict[str, Any]] = []
        for i in range(c, actions, CONNECTORS):
            verb, noun = VERBS[i % len(VERBS)], NOUNS[(i // len(VERBS)) % len(NOUNS)]
            method = {"list": "GET", "get": "GET", "search": "GET", "delete": "DELETE"}.get(
                verb, "POST"
            )
            entries.append({
                "name": f"{verb}_{noun}_{i}",
                "description": f"{verb.capitalize()} a {noun} ({i}) of the c{c} service",
                "method": method,
                "path": f"/{noun}s/{{id}}/op{i}",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "string", "description": f"the {noun}"},
                        "fields": {"type": "array", "items": {"type": "string"}},
                    },
                    "required": ["id"],
                },
            })  # fmt: skip
        manifest = {"name": f"c{c}", "base_url": "http://127.0.0.1:9", "actions": entries}
        (directory / f"c{c}.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))


async def measure(actions: int, rounds: int) -> None:
    limits = EngineLimits()
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        manifests(directory, actions)
        async with client_session() as http, started(FakeOpenAI()) as fake:
            connectors = await ConnectorSet.load(directory, http=http, environ={})
            tools = connectors.tools
            pick = next(name for name in tools.names() if name.startswith("c7__restore_issue"))
            fake.respond_with(lambda body: tool_call("select_tools", {"tools": [pick]}))
            llm = make_llm(fake)
            building: list[float] = []
            selecting: list[float] = []
            for _ in range(rounds):
                began = time.process_time()
                shown = catalogue(QUERY, tools, limits.tool_catalogue_max_chars)
                building.append((time.process_time() - began) * 1000)
                began = time.process_time()
                selection = await select_tools(llm, QUERY, tools, limits)
                selecting.append((time.process_time() - began) * 1000)
                assert selection.tools.names() == [pick], selection.tools.names()
            body = json.dumps(fake.requests[-1]).encode()
            whole = "\n".join(f"- {t.name}: {t.summary}" for t in tools).encode()
            await connectors.close()
    print(f"bench: tool_selection_tools = {len(tools)} tools")
    print(f"bench: tool_selection_request_bytes = {len(body)} bytes")
    print(f"bench: tool_selection_catalogue_bytes = {len(shown.encode())} bytes")
    print(f"bench: tool_selection_whole_catalogue_bytes = {len(whole)} bytes (before: all sent)")
    print(f"bench: tool_selection_catalogue_cpu = {statistics.median(building):.1f} ms")
    print(f"bench: tool_selection_cpu = {statistics.median(selecting):.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--actions", type=int, default=6000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    asyncio.run(measure(args.actions, args.rounds))


if __name__ == "__main__":
    main()
