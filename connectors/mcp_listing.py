"""`chatops manifests list --connect`: each MCP server started (or reached) once, its real tools
listed with the policy that applies to each, then stopped.

That list is what a reviewer needs to write approval rules: a server's tools are only known
once it runs. A server that cannot be reached, or whose secrets are not set, is reported in one
line instead of its tools.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping, Sequence

from bot.engine.tools import Tool
from connectors.loading import missing_env
from connectors.manifest import McpConnector
from connectors.mcp import McpServer, McpUnavailable, mcp_tools
from connectors.schema_fit import SchemaBudget


async def connected(
    manifests: Sequence[McpConnector],
    *,
    budget: SchemaBudget,
    environ: Mapping[str, str] | None = None,
) -> dict[str, list[Tool] | str]:
    """Per connector name: its tools, or why there are none to show (one line)."""
    env = environ if environ is not None else os.environ

    async def one(manifest: McpConnector) -> list[Tool] | str:
        missing = missing_env(manifest, env)
        if missing:
            return f"{manifest.name}: not connected: {', '.join(missing)} not set"
        server = McpServer(manifest, environ=env, schema_budget=budget)
        try:
            return await mcp_tools(server)
        except McpUnavailable as exc:
            return f"{manifest.name}: MCP server unreachable: {exc.server!r} {exc.reason}"
        finally:
            await server.close()

    results = await asyncio.gather(*(one(manifest) for manifest in manifests))
    return {manifest.name: result for manifest, result in zip(manifests, results, strict=True)}
