"""MCP servers as tools, through the official `mcp` SDK (stdio `command` or streamable HTTP `url`).

The SDK's transports are anyio task groups that must be entered and left by the same task, while
tool calls arrive from many run tasks. So each server has one owner task that holds the client
open until `close()`; calls borrow the open client. A server that dies is reported on the call
that finds it gone and started again on the next call.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import re
from collections.abc import Mapping
from contextlib import AsyncExitStack
from dataclasses import replace
from functools import partial
from typing import Any

import httpx2
import mcp_types
from mcp import Client, MCPError
from mcp.client.session import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.dispatcher import ProgressFnT

from bot.approvals.schema import policy_metadata
from bot.engine.arguments import argument_problem
from bot.engine.tools import AskUser, Audience, ProgressReport, Question, Tool, ToolResult
from bot.errors import ConnectorError
from bot.redaction import redact_text
from connectors.auth import credentials, secret_values
from connectors.breaker import CircuitBreaker
from connectors.manifest import TOOL_NAME_RE, McpConnector
from connectors.mcp_content import render_call_result
from connectors.mcp_policy import resolve_policy
from connectors.mcp_stdio import StdioServerProcess
from connectors.mcp_text import clean_schema, clean_text
from connectors.schema_fit import SchemaBudget, SchemaTooLarge, fit_whole_schema

log = logging.getLogger(__name__)

CONNECTION_CLOSED = mcp_types.CONNECTION_CLOSED
REQUEST_TIMEOUT = mcp_types.REQUEST_TIMEOUT
SESSION_HEADER = "mcp-session-id"
_INVALID_CHARS = re.compile(r"[^a-zA-Z0-9_-]")
MAX_LISTED_PAGES = 50
MAX_DESCRIPTION_CHARS = 1000
MAX_PROGRESS_CHARS = 200  # a progress message, as the status shows it
SHUTDOWN_TIMEOUT_S = 15.0
SDK_LOGGERS = ("mcp", "mcp_types")


def quiet_sdk_logs() -> None:
    """The SDK's own log lines only when the bot logs at DEBUG. Otherwise they reach the
    terminal (`chatops chat` configures no log handler, so Python prints warnings on stderr)
    and the log with session ids and tracebacks; the connector says what failed in its own,
    redacted words."""
    debug = logging.getLogger().getEffectiveLevel() <= logging.DEBUG
    for name in SDK_LOGGERS:
        logging.getLogger(name).setLevel(logging.DEBUG if debug else logging.CRITICAL + 1)


class McpUnavailable(ConnectorError):
    """The server could not be started or reached: `reason` says why, as a phrase that follows
    the server's name ("exited with status 3; ...", "did not answer within 60s")."""

    def __init__(self, server: str, reason: str) -> None:
        """`reason` may go on, after a ";", with the last lines of the server's stderr."""
        super().__init__(f"MCP server {server!r} {reason}")
        self.server = server
        self.reason = reason


class McpRefused(McpUnavailable):
    """The server answered, but its tools cannot be used (retrying would not help)."""


def tool_name_for(connector: str, mcp_name: str) -> str:
    """`<connector>__<tool>` as a valid function name (odd characters become `_`; names over 64
    characters are shortened with a hash so two long names stay distinct)."""
    name = f"{connector}__{_INVALID_CHARS.sub('_', mcp_name)}"
    if len(name) > 64:
        digest = hashlib.sha256(mcp_name.encode()).hexdigest()[:8]
        name = f"{name[:55]}_{digest}"
    return name


def _leaf(exc: BaseException) -> BaseException:
    """The first real exception inside (nested) exception groups from the SDK's task groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


class McpServer:
    """One MCP server: started on first use, shared by every call, restarted after a crash."""

    def __init__(
        self,
        manifest: McpConnector,
        *,
        environ: Mapping[str, str] | None = None,
        schema_budget: SchemaBudget = SchemaBudget(),  # noqa: B008 - frozen
        breaker: CircuitBreaker | None = None,
    ) -> None:
        self.manifest = manifest
        self.breaker = breaker  # the connector's: a server that keeps failing is not called
        self.schema_budget = schema_budget  # tool schemas bigger than this are shown shaped
        self.environ = environ if environ is not None else os.environ
        self.starts = 0
        self._client: Client | None = None
        self._process: StdioServerProcess | None = None  # the current run of a stdio server
        self._owner: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self._lock = asyncio.Lock()
        quiet_sdk_logs()
        self._asking: dict[int, AskUser] = {}  # calls in flight that can ask their people
        self._calls = 0
        self._lost_session = 0  # the run (`starts`) whose session id a server answered 404 to

    @property
    def name(self) -> str:
        return self.manifest.name

    def secrets(self) -> list[str]:
        values = [self.environ[v] for v in self.manifest.env.values() if self.environ.get(v)]
        return values + secret_values(self.manifest.auth, self.environ)

    @property
    def running(self) -> bool:
        return self._client is not None and self._owner is not None and not self._owner.done()

    async def _open(self, stack: AsyncExitStack) -> Client:
        m = self.manifest
        if m.command is not None:
            env = {key: self.environ.get(var, "") for key, var in m.env.items()}
            self._process = StdioServerProcess(
                m.command, name=self.name, env=env, cwd=m.cwd, secrets=self.secrets
            )
            client = Client(
                self._process.transport(),
                read_timeout_seconds=m.timeout_s,
                logging_callback=self._on_log,
                elicitation_callback=self._on_elicit,
            )
        else:
            headers = {**m.headers, **credentials(m.auth, self.environ).headers}
            http = await stack.enter_async_context(create_mcp_http_client(headers=headers))
            http.event_hooks["response"].append(self._note_response)
            transport = streamable_http_client(m.url or "", http_client=http)
            client = Client(
                transport,
                read_timeout_seconds=m.timeout_s,
                logging_callback=self._on_log,
                elicitation_callback=self._on_elicit,
            )
        return await stack.enter_async_context(client)

    async def _own(self, ready: asyncio.Future[Client]) -> None:
        """Hold the client open in this task until `close()` or a crash."""
        try:
            async with AsyncExitStack() as stack:
                client = await self._open(stack)
                self._client = client
                ready.set_result(client)
                await self._stop.wait()
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # noqa: BLE001 - the SDK raises groups; report the cause
            reason = redact_text(self._failure(exc), self.secrets())
            if not ready.done():
                ready.set_exception(McpUnavailable(self.name, reason))
            else:
                log.warning("MCP server %s stopped: it %s", self.name, reason)
        finally:
            self._client = None

    def _failure(self, exc: BaseException) -> str:
        """Why the server went away, as a phrase: how its process ended when we know."""
        ended = self._process.exit if self._process is not None else None
        if ended is not None:
            return ended.describe()
        leaf = _leaf(exc)
        if isinstance(leaf, OSError) and self.manifest.command:
            return f"cannot be started ({self.manifest.command[0]!r}: {leaf.strerror or leaf})"
        if self.manifest.url:
            return f"cannot be reached at {self.manifest.url} ({type(leaf).__name__}: {leaf})"
        return f"failed ({type(leaf).__name__}: {leaf})"

    async def ensure(self) -> Client:
        """The open client, starting (or restarting) the server when needed."""
        async with self._lock:
            if self.running and self._client is not None:
                return self._client
            await self._shutdown()
            self._stop = asyncio.Event()
            ready: asyncio.Future[Client] = asyncio.get_running_loop().create_future()
            self.starts += 1
            self._owner = asyncio.create_task(self._own(ready), name=f"mcp:{self.name}")
            try:
                return await asyncio.wait_for(asyncio.shield(ready), self.manifest.timeout_s)
            except TimeoutError:
                await self._shutdown(cancel=True)
                raise McpUnavailable(
                    self.name, f"did not answer within {self.manifest.timeout_s:g}s"
                ) from None

    async def _shutdown(self, *, cancel: bool = False) -> None:
        """Stop the owner task: politely (the SDK closes the session and the process), or by
        cancelling it when it is stuck starting or the polite way takes too long."""
        owner, self._owner = self._owner, None
        if owner is None:
            return
        self._stop.set()
        if not cancel:
            done, _ = await asyncio.wait({owner}, timeout=SHUTDOWN_TIMEOUT_S)
            cancel = not done
            if cancel:
                log.warning("MCP server %s did not shut down in time; cancelling", self.name)
        if cancel:
            owner.cancel()
        try:
            await owner
        except asyncio.CancelledError:
            if not owner.cancelled():
                raise  # we ourselves are being cancelled
        except Exception:  # noqa: BLE001 - shutting down a broken server must not raise
            log.debug("MCP server %s shutdown raised", self.name, exc_info=True)

    async def close(self) -> None:
        async with self._lock:
            await self._shutdown()

    async def list_tools(self) -> list[mcp_types.Tool]:
        client = await self.ensure()
        tools: list[mcp_types.Tool] = []
        cursor: str | None = None
        for _ in range(MAX_LISTED_PAGES):
            page = await client.list_tools(cursor=cursor)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        return tools

    async def call(
        self,
        mcp_name: str,
        args: dict[str, Any],
        progress: ProgressReport | None = None,
        ask: AskUser | None = None,
    ) -> ToolResult:
        """Call one tool; every failure is an observation naming the server. The breaker
        counts the server's own failures (unreachable, crashed, timed out), not a tool's
        error answer. With `progress`, the call carries a progress token and the server's
        `notifications/progress` are passed on (their message cleaned and redacted). With
        `ask`, a question the server asks during the call goes to the call's people
        (`_on_elicit`)."""
        if self.breaker is not None and (refused := self.breaker.admit()) is not None:
            return ToolResult.error(refused)
        fault: bool | None = None
        self._calls += 1
        key = self._calls
        if ask is not None:
            self._asking[key] = ask
        try:
            result, fault = await self._call(mcp_name, args, progress)
        finally:
            self._asking.pop(key, None)
            if self.breaker is not None:
                self.breaker.settle(fault)
        return result

    async def _call(
        self, mcp_name: str, args: dict[str, Any], progress: ProgressReport | None
    ) -> tuple[ToolResult, bool]:
        """The result, and whether the server itself failed.

        A remote server that answers 404 to our session id has forgotten the session (it
        restarted, or expired it): the request was not run, so a new session is started and
        the call made once more (MCP spec, streamable HTTP, "Session Management")."""
        for attempt in (1, 2):
            try:
                client = await self.ensure()
            except McpUnavailable as exc:  # the model gets how it ended, not what it wrote
                why = exc.reason.split(";")[0]
                message = (
                    f"MCP server {self.name!r} {why}. It will be started again on the next call."
                )
                return ToolResult.error(message), True
            session = self.starts
            try:
                result = await client.call_tool(
                    mcp_name, args, progress_callback=self._progress(progress)
                )
            except MCPError as exc:
                if self._lost_session == session and attempt == 1:
                    log.warning(
                        "MCP server %s no longer knows our session (HTTP 404; did it restart?): "
                        "starting a new session and calling %r again",
                        self.name,
                        mcp_name,
                    )
                    await self._close_run(session)
                    continue
                server_fault = exc.code in (CONNECTION_CLOSED, REQUEST_TIMEOUT) or (
                    self._lost_session == session
                )
                return await self._call_failed(mcp_name, exc, session), server_fault
            except (OSError, RuntimeError, ValueError) as exc:
                await self.close()
                return ToolResult.error(
                    f"MCP server {self.name!r} failed ({type(exc).__name__}: {exc}); "
                    "it will be restarted on the next call."
                ), True
            return render_call_result(result, self.manifest.result, secrets=self.secrets()), False
        raise AssertionError("unreachable: the second attempt returns")

    def _progress(self, report: ProgressReport | None) -> ProgressFnT | None:
        """The SDK's progress callback (giving one makes it send a progress token)."""
        if report is None:
            return None

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            text = redact_text(clean_text(message or "", MAX_PROGRESS_CHARS), self.secrets())
            await report(progress, total, text)

        return on_progress

    async def _on_elicit(
        self, context: ClientRequestContext, params: mcp_types.ElicitRequestParams
    ) -> mcp_types.ElicitResult:
        """A server's `elicitation/create`: a form for the people of the call that is running.

        The request does not say which call it belongs to, so it is asked only when exactly
        one call that can ask is in flight on this server; otherwise (none, or several at
        once) it is cancelled. URL mode (sign-ins, payments out of band) is declined. The
        answer is never an approval: it only goes back to the server (`bot.elicitation`)."""
        if isinstance(params, mcp_types.ElicitRequestURLParams):
            log.info("MCP server %s asked for a URL elicitation: declined", self.name)
            return mcp_types.ElicitResult(action="decline")
        askers = list(self._asking.values())
        if len(askers) != 1:
            log.warning(
                "MCP server %s asked a question with %d calls in flight: cancelled (it cannot "
                "be told which call asks)",
                self.name,
                len(askers),
            )
            return mcp_types.ElicitResult(action="cancel")
        message = redact_text(clean_text(params.message, MAX_DESCRIPTION_CHARS), self.secrets())
        question = Question(
            message=message, schema=dict(params.requested_schema or {}), asker=self.name
        )
        reply = await askers[0](question)
        if reply.action == "accept":
            content = dict(reply.content or {})
            return mcp_types.ElicitResult(action="accept", content=content)
        action = "decline" if reply.action == "decline" else "cancel"
        return mcp_types.ElicitResult(action=action)

    async def _on_log(self, params: mcp_types.LoggingMessageNotificationParams) -> None:
        """A server's `notifications/message`: into our log at DEBUG, cleaned and redacted,
        never onto the terminal (the SDK would drop it; an operator may want it)."""
        data = params.data if isinstance(params.data, str) else repr(params.data)
        text = redact_text(clean_text(data, MAX_DESCRIPTION_CHARS), self.secrets())
        log.debug("MCP server %s says (%s): %s", self.name, params.level, text)

    async def _close_run(self, run: int) -> None:
        """Close the client if it is still that run (a concurrent call may have replaced it)."""
        async with self._lock:
            if self.starts == run:
                await self._shutdown()

    async def _call_failed(self, mcp_name: str, exc: MCPError, session: int) -> ToolResult:
        """An error answer (or none) to a call, as the observation the model reads."""
        if exc.code == CONNECTION_CLOSED:
            await self.close()
            return ToolResult.error(
                f"MCP server {self.name!r} stopped (connection closed); the call may not "
                "have run. The server will be restarted on the next call."
            )
        if exc.code == REQUEST_TIMEOUT:
            return ToolResult.error(
                f"MCP server {self.name!r} did not answer the call to {mcp_name!r} within "
                f"{self.manifest.timeout_s:g}s (the connector's timeout_s); the call may still "
                "be running on the server."
            )
        if self._lost_session == session:
            return ToolResult.error(
                f"MCP server {self.name!r} lost our session again right after a new one was "
                "started (HTTP 404); the call did not run."
            )
        return ToolResult.error(f"MCP server {self.name!r} error {exc.code}: {exc}")

    async def _note_response(self, response: httpx2.Response) -> None:
        """httpx response hook: a 404 to a request that carried our session id means the
        server has forgotten the session (the SDK reports it only as an error message)."""
        if response.status_code == 404 and SESSION_HEADER in response.request.headers:
            self._lost_session = self.starts


async def mcp_tools(server: McpServer) -> list[Tool]:
    """The server's tools as `<connector>__<tool>`, with approval rules by name pattern and the
    server's hints weighed by `resolve_policy`.
    Descriptions are the server's words in every prompt: cleaned and capped (`clean_text`).
    A tool the server will only run as a task (`execution.taskSupport: required`, MCP
    2025-11-25) would fail on every plain call: it is left out, with a warning.
    """
    manifest = server.manifest
    tools: list[Tool] = []
    seen: dict[str, str] = {}
    for listed in await server.list_tools():
        name = tool_name_for(manifest.name, listed.name)
        if name in seen or not TOOL_NAME_RE.match(name):
            raise McpRefused(
                manifest.name,
                f"lists tools {seen.get(name)!r} and {listed.name!r} that both map to {name!r}",
            )
        seen[name] = listed.name
        if listed.execution is not None and listed.execution.task_support == "required":
            log.warning(
                "MCP server %s: tool %r left out: it can only be called as a task "
                "(execution.taskSupport: required), which chatops does not support",
                manifest.name,
                listed.name,
            )
            continue
        schema = clean_schema(listed.input_schema or {"type": "object", "properties": {}})
        try:
            shown = fit_whole_schema(schema, server.schema_budget)
        except SchemaTooLarge as exc:
            log.warning("MCP server %s: tool %r left out: %s", manifest.name, listed.name, exc)
            continue
        # as for HTTP, the manifest's description says which system the tool is part of
        system = f" ({manifest.name}: {manifest.description})" if manifest.description else ""
        room = max(MAX_DESCRIPTION_CHARS - len(system), MAX_DESCRIPTION_CHARS // 2)
        description = clean_text(listed.description or listed.title or "", room) or listed.name
        description += system
        tools.append(
            Tool(
                name=name,
                description=description,
                parameters=shown,
                validation_schema=None if shown is schema else schema,
                invoke=partial(_validated_call, server, listed.name, name, schema, Audience()),
                invoke_for=partial(_call_for, server, listed.name, name, schema),
                connector=manifest.name,
                action=listed.name,
                metadata=policy_metadata(resolve_policy(manifest, listed)),
                secret_values=server.secrets,
            )
        )
    return tools


async def _call_for(
    server: McpServer,
    mcp_name: str,
    tool_name: str,
    schema: Mapping[str, Any],
    audience: Audience,
    args: dict,
) -> ToolResult:
    """A call made in a run: its progress goes to the run's status, its questions to the
    run's requesters."""
    return await _validated_call(server, mcp_name, tool_name, schema, audience, args)


async def _validated_call(
    server: McpServer,
    mcp_name: str,
    tool_name: str,
    schema: Mapping[str, Any],
    audience: Audience,
    args: dict,
) -> ToolResult:
    """Check the arguments against the listed schema first: the model gets a clear correction."""
    problem = argument_problem(tool_name, schema, args)  # None: valid, or a schema we cannot apply
    if problem is not None:
        return ToolResult.error(problem)
    try:
        result = await server.call(mcp_name, args, audience.progress, audience.ask)
    except Exception as exc:  # noqa: BLE001 - an observation, and never with a secret in it
        log.warning("%s failed unexpectedly: %s", tool_name, type(exc).__name__)
        result = ToolResult.error(f"{tool_name} failed: {type(exc).__name__}: {exc}")
    return replace(result, content=redact_text(result.content, server.secrets()))
