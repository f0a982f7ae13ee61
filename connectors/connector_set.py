"""ConnectorSet: every manifest in a directory compiled to one `ToolRegistry`.

Loading fails early and readably: schema errors and duplicate names raise `ManifestError`
(naming file, action and field). A connector whose secret variables are unset is reported when
the manifests load (naming file and variable), not at its first call: with `strict=True` that is
an error; by default the connector is left out, logged, and listed in `skipped`, so one missing
token does not take the whole bot down. MCP servers are started at load time so their tools can
be listed, and stopped by `close()`; a server that cannot be started or reached is left out with
a warning too ("MCP server unreachable", listed in `down`), and `keep_retrying` brings it back
in the background (`mcp_recovery`). Each connector's calls go through its circuit breaker
(`breakers`: a connector that keeps failing is not called for a cool-down).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import aiohttp

from bot.engine.tools import Tool, ToolRegistry
from connectors.breaker import Breakers
from connectors.http import http_tools
from connectors.loading import (
    ToolNames,
    base_url_problem,
    check_env,
    load_manifest_dir,
    missing_env,
)
from connectors.manifest import (
    AnyConnector,
    HttpConnector,
    ManifestError,
    McpConnector,
)
from connectors.manifest_auth import OAuth2Auth, auth_choice
from connectors.mcp_recovery import DownServer, McpRecovery, Register
from connectors.oauth_service import OAuthService
from connectors.schema_fit import SchemaBudget
from connectors.sql.manifest import SqlConnector

if TYPE_CHECKING:  # the MCP SDK is imported only by a bot that has an MCP server
    from connectors.mcp import McpServer
    from connectors.sql.database import SqlDatabase

log = logging.getLogger(__name__)


class ConnectorSet:
    """The tools of all manifests, plus the MCP servers behind some of them."""

    def __init__(
        self,
        tools: ToolRegistry,
        *,
        manifests: list[tuple[Path, AnyConnector]],
        servers: list[McpServer],
        databases: list[SqlDatabase] | None = None,
        skipped: list[str] | None = None,
        left_out: list[str] | None = None,
        recovery: McpRecovery | None = None,
        breakers: Breakers | None = None,
    ) -> None:
        self.tools = tools
        self.manifests = manifests
        self.servers = servers
        self.databases = databases or []  # SQL connectors' connection pools, closed with us
        self.skipped = skipped or []  # one line per connector left out for missing secrets
        self.left_out = left_out or []  # their names
        self.recovery = recovery or McpRecovery()
        self.breakers = breakers or Breakers()  # each connector's circuit breaker (this process)

    @property
    def down(self) -> list[DownServer]:
        """MCP connectors left out because their server is down (or unusable), and why."""
        return list(self.recovery.down)

    @property
    def oauth_connectors(self) -> list[str]:
        """Names of the loaded connectors that act as people (auth type oauth2)."""
        return [
            m.name for _, m in self.manifests if isinstance(getattr(m, "auth", None), OAuth2Auth)
        ]

    async def wait_until(self, predicate: Callable[[], bool], timeout: float) -> None:  # noqa: ASYNC109
        """Wait for a state of `down` (a server came up, or failed another attempt)."""
        await self.recovery.wait_until(predicate, timeout)

    def keep_retrying(self, register: Register, *, max_delay_s: float) -> None:
        """Retry the servers that are down in the background; `register` gets the tools of
        each that comes up. The tasks end with `close()`."""
        self.recovery.start(register, max_delay_s=max_delay_s)

    @classmethod
    async def load(
        cls,
        manifests_dir: Path,
        *,
        http: aiohttp.ClientSession,
        environ: Mapping[str, str] | None = None,
        missing_ok: bool = False,
        strict: bool = False,
        schema_budget: SchemaBudget = SchemaBudget(),  # noqa: B008 - frozen
        reserved: Mapping[str, str] | None = None,
        breakers: Breakers | None = None,
        oauth: OAuthService | None = None,
    ) -> ConnectorSet:
        """Load, validate and compile every manifest; raises `ManifestError` on any problem.

        `missing_ok` turns an absent directory into an empty set (a bot with no connectors yet);
        `strict` makes a missing secret variable an error instead of leaving the connector out;
        an MCP tool whose input schema is bigger than `schema_budget` is shown to the model
        shaped down (its arguments are still checked against the whole schema). `reserved`:
        tool names that are not the manifests' to take (built-ins), each with its owner.

        Names are claimed by what the manifests declare first (HTTP actions, `reserved`), then
        by what MCP servers list: a server listing a tool whose name is taken is refused and
        left out (it may not shadow another connector's tool or a built-in), the rest loads.
        `breakers`: the connectors' circuit breakers (settings and clock; default: the defaults).
        `oauth`: people's credentials, for connectors with auth type oauth2 (each is added to
        it); without it such a connector acts only as the bot (`on_behalf_of: bot`, fallback).
        """
        env = environ if environ is not None else os.environ
        manifests_dir = Path(manifests_dir)
        if missing_ok and not manifests_dir.exists():
            return cls(ToolRegistry(), manifests=[], servers=[], breakers=breakers)
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
        left_out: list[str] = []
        for path, manifest in list(manifests):
            missing = missing_env(manifest, env)
            if missing:
                left_out.append(manifest.name)
                names = ", ".join(missing)
                what = f"variable {names} is" if len(missing) == 1 else f"variables {names} are"
                skipped.append(
                    f"{path}: environment {what} not set (connector {manifest.name!r} left out)"
                )
                log.warning("%s", skipped[-1])
                manifests.remove((path, manifest))
            elif not isinstance(manifest, SqlConnector) and (
                chosen := auth_choice(manifest.auth, env)
            ):
                log.info("%s: auth %s", manifest.name, chosen)
        tools: list[Tool] = []
        servers: list[McpServer] = []
        databases: list[SqlDatabase] = []
        if any(isinstance(manifest, McpConnector) for _, manifest in manifests):
            # the MCP SDK is a large import: only a bot with an MCP server pays for it
            from connectors.mcp import McpServer, McpUnavailable, mcp_tools

        recovery = McpRecovery()
        breakers = breakers or Breakers()
        names = ToolNames()
        for name, owner in (reserved or {}).items():
            names.claim(name, owner)
        try:
            for path, manifest in manifests:
                if isinstance(manifest, HttpConnector):
                    breaker = breakers.of(manifest.name)
                    if oauth is not None and isinstance(manifest.auth, OAuth2Auth):
                        oauth.add_connector(manifest)
                    compiled = http_tools(manifest, http, environ=env, breaker=breaker, oauth=oauth)
                    claim_all_declared(names, compiled, path)
                    tools.extend(compiled)
                elif isinstance(manifest, SqlConnector):
                    compiled = _sql_tools(manifest, env, breakers, databases)
                    claim_all_declared(names, compiled, path)
                    tools.extend(compiled)
            for path, manifest in manifests:
                if isinstance(manifest, McpConnector):
                    server = McpServer(
                        manifest,
                        environ=env,
                        schema_budget=schema_budget,
                        breaker=breakers.of(manifest.name),
                    )
                    servers.append(server)
                    try:
                        compiled = await mcp_tools(server)
                        claim_all(names, compiled, path)
                    except McpUnavailable as exc:
                        await server.close()
                        recovery.add(path, server, exc)
                        continue
                    tools.extend(compiled)
        except BaseException:
            for server in servers:
                await server.close()
            for database in databases:
                database.dispose()
            raise
        return cls(
            ToolRegistry(tools),
            manifests=manifests,
            servers=servers,
            databases=databases,
            skipped=skipped,
            left_out=left_out,
            recovery=recovery,
            breakers=breakers,
        )

    async def close(self) -> None:
        """Stop the retries and every MCP server this set started; close the SQL pools."""
        await self.recovery.close()
        for server in self.servers:
            await server.close()
        for database in self.databases:
            database.dispose()

    async def __aenter__(self) -> ConnectorSet:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def claim_all(names: ToolNames, compiled: list[Tool], path: Path) -> None:
    """Claim every tool name a server listed, or none: one that is taken refuses the server."""
    from connectors.mcp import McpRefused  # loaded by then: the tools came from a server

    for tool in compiled:
        if (taken := names.taken(tool.name)) is not None:
            raise McpRefused(
                tool.connector, f"lists {tool.action!r}, which would shadow another tool: {taken}"
            )
    for tool in compiled:
        names.claim(tool.name, f"{path} ({tool.connector}/{tool.action})")


def claim_all_declared(names: ToolNames, compiled: list[Tool], path: Path) -> None:
    """Claim the tool names a manifest declares; one that is taken is a manifest error."""
    for tool in compiled:
        clash = names.claim(tool.name, f"{path} ({tool.connector}/{tool.action})")
        if clash:
            where = f"{path}: {tool.connector}/{tool.action}"
            raise ManifestError(f"{where}: {clash}", path=path)


def _sql_tools(
    manifest: SqlConnector,
    environ: Mapping[str, str],
    breakers: Breakers,
    databases: list[SqlDatabase],
) -> list[Tool]:
    """A SQL connector's tools; its database (pool) joins `databases`, to be closed later."""
    from connectors.sql.database import SqlDatabase
    from connectors.sql.tools import sql_tools

    database = SqlDatabase(manifest, environ)
    databases.append(database)
    return sql_tools(manifest, database, breaker=breakers.of(manifest.name))
