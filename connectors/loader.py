"""ConnectorSet: every manifest in a directory compiled to one `ToolRegistry`.

Loading fails early and readably: schema errors and duplicate names raise `ManifestError`
(naming file, action and field). A connector whose secret variables are unset is reported when
the manifests load (naming file and variable), not at its first call: with `strict=True` that is
an error; by default the connector is left out, logged, and listed in `skipped`, so one missing
token does not take the whole bot down. MCP servers are started at load time so their tools can
be listed, and stopped by `close()`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path

import aiohttp

from bot.engine.tools import Tool, ToolRegistry
from connectors.http import http_tools
from connectors.loading import (
    ToolNames,
    base_url_problem,
    check_env,
    load_manifest_dir,
    missing_env,
)
from connectors.manifest import (
    HttpConnector,
    ManifestError,
    McpConnector,
)
from connectors.mcp import McpServer, McpUnavailable, mcp_tools

log = logging.getLogger(__name__)


class ConnectorSet:
    """The tools of all manifests, plus the MCP servers behind some of them."""

    def __init__(
        self,
        tools: ToolRegistry,
        *,
        manifests: list[tuple[Path, HttpConnector | McpConnector]],
        servers: list[McpServer],
        skipped: list[str] | None = None,
    ) -> None:
        self.tools = tools
        self.manifests = manifests
        self.servers = servers
        self.skipped = skipped or []

    @classmethod
    async def load(
        cls,
        manifests_dir: Path,
        *,
        http: aiohttp.ClientSession,
        environ: Mapping[str, str] | None = None,
        missing_ok: bool = False,
        strict: bool = False,
    ) -> ConnectorSet:
        """Load, validate and compile every manifest; raises `ManifestError` on any problem.

        `missing_ok` turns an absent directory into an empty set (a bot with no connectors yet);
        `strict` makes a missing secret variable an error instead of leaving the connector out.
        """
        env = environ if environ is not None else os.environ
        manifests_dir = Path(manifests_dir)
        if missing_ok and not manifests_dir.exists():
            return cls(ToolRegistry(), manifests=[], servers=[])
        manifests = load_manifest_dir(manifests_dir)
        if strict:
            check_env(manifests, env)
        bad_urls = [
            f"{path}: {problem}"
            for path, manifest in manifests
            if (problem := base_url_problem(manifest, env))
        ]
        if bad_urls:
            raise ManifestError("\n".join(bad_urls), path=manifests_dir)
        skipped: list[str] = []
        for path, manifest in list(manifests):
            missing = missing_env(manifest, env)
            if missing:
                names = ", ".join(missing)
                what = f"variable {names} is" if len(missing) == 1 else f"variables {names} are"
                skipped.append(
                    f"{path}: environment {what} not set (connector {manifest.name!r} left out)"
                )
                log.warning("%s", skipped[-1])
                manifests.remove((path, manifest))
        tools: list[Tool] = []
        servers: list[McpServer] = []
        names = ToolNames()
        try:
            for path, manifest in manifests:
                if isinstance(manifest, HttpConnector):
                    compiled = http_tools(manifest, http, environ=env)
                else:
                    server = McpServer(manifest, environ=env)
                    servers.append(server)
                    try:
                        compiled = await mcp_tools(server)
                    except McpUnavailable as exc:
                        raise ManifestError(f"{path}: {exc}", path=path) from None
                for tool in compiled:
                    clash = names.claim(tool.name, f"{path} ({tool.connector}/{tool.action})")
                    if clash:
                        where = f"{path}: {tool.connector}/{tool.action}"
                        raise ManifestError(f"{where}: {clash}", path=path)
                tools.extend(compiled)
        except BaseException:
            for server in servers:
                await server.close()
            raise
        return cls(ToolRegistry(tools), manifests=manifests, servers=servers, skipped=skipped)

    async def close(self) -> None:
        """Stop every MCP server this set started."""
        for server in self.servers:
            await server.close()

    async def __aenter__(self) -> ConnectorSet:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
