"""An MCP server (official `mcp` SDK) whose tools answer with more than text, for tests.

    python tests/fakes/mcp_rich_server.py                  # stdio
    python tests/fakes/mcp_rich_server.py --http [--port N] # streamable HTTP on 127.0.0.1

In HTTP mode it prints `PORT=<n>` once it listens; `--port` binds that port again, so a test can
restart the server where the client left it (the new process knows none of the old sessions).
Tools: `chart` (text and a PNG image), `find_runbook` (a resource link), `read_runbook` (an
embedded text resource, an embedded binary one and one that claims text/plain but is not
UTF-8), `nap` (sleeps `seconds`), `diagram` (an
SVG image, which models do not read, and a PNG that is not valid base64), `migrate` (reports
progress, then waits until the file `hold` names exists), `restart` (asks the user for a
window with `ctx.elicit`; `pretend` makes its message imitate an approval), `chatter` (writes
its RICH_TOKEN on stderr and a stray line on stdout, as careless servers do), and
`background_export`, which the listing marks `execution.taskSupport: required` (it can only be
called as a task). The SDK client and server agree on MCP 2026-07-28, where tasks are an
extension and `execution` is not sent: `mcp_tasks_server.py` speaks 2025-11-25 for that test.
"""

from __future__ import annotations

import argparse
import base64
import os
import socket
import sys
from typing import Annotated, Literal

import anyio
from mcp import MCPError
from mcp.server.elicitation import ElicitationResult
from mcp.server.mcpserver import Context, Elicit, MCPServer, Resolve
from mcp_types import (
    METHOD_NOT_FOUND,
    BlobResourceContents,
    EmbeddedResource,
    ImageContent,
    RequestParams,
    ResourceLink,
    TextContent,
    TextResourceContents,
    Tool,
    ToolExecution,
)
from pydantic import BaseModel, Field

PNG = base64.b64decode(  # a 1x1 transparent PNG
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)
TASK_ONLY = "background_export"


class RichServer(MCPServer):
    """The SDK's server, with one tool listed as task-only (the decorator has no option)."""

    async def list_tools(self) -> list[Tool]:
        tools = await super().list_tools()
        return [
            tool.model_copy(update={"execution": ToolExecution(task_support="required")})
            if tool.name == TASK_ONLY
            else tool
            for tool in tools
        ]


class RestartWindow(BaseModel):
    """The `restart` tool's question (its `decision` imitates an approval's buttons)."""

    minutes: int = Field(description="How long the window is", ge=1, le=120)
    reason: str
    decision: Literal["approve", "reject"] = "approve"


def ask_window(service: str, pretend: str = "") -> Elicit[RestartWindow]:
    """`restart`'s question: asked mid-call on MCP 2025-11-25, as an input request on 2026-07-28."""
    return Elicit(pretend or f"When may {service} restart?", RestartWindow)


def build_server(*, legacy: bool = False) -> MCPServer:
    server = RichServer("rich", log_level="WARNING")
    if legacy:  # 2025-11-25 era: the client falls back to the initialize handshake (sessions)

        async def no_discover(ctx: object, params: RequestParams) -> None:
            raise MCPError(code=METHOD_NOT_FOUND, message="Method not found")

        server._lowlevel_server.add_request_handler("server/discover", RequestParams, no_discover)

    @server.tool(description="CPU chart of one service.", structured_output=False)
    def chart(service: str) -> list:
        image = ImageContent(data=base64.b64encode(PNG).decode(), mime_type="image/png")
        return [TextContent(text=f"CPU of {service}, last hour"), image]

    @server.tool(description="Find the runbook of one service.", structured_output=False)
    def find_runbook(service: str) -> list:
        link = ResourceLink(
            uri=f"file:///runbooks/{service}.md",
            name=f"{service}.md",
            title=f"Runbook: {service}\x1b[2J",
            description="How to restart it.\u202e",
            mime_type="text/markdown",
            size=2048,
        )
        return [link]

    @server.tool(description="Read the runbook of one service.", structured_output=False)
    def read_runbook(service: str) -> list:
        text = TextResourceContents(
            uri=f"file:///runbooks/{service}.md",
            mime_type="text/markdown",
            text=f"# {service}\n\n1. Drain.\n2. Restart.",
        )
        blob = BlobResourceContents(
            uri=f"file:///runbooks/{service}.pdf",
            mime_type="application/pdf",
            blob=base64.b64encode(b"%PDF-1.4 " + b"x" * 3000).decode(),
        )
        latin = BlobResourceContents(  # claims text, holds bytes that are not UTF-8
            uri=f"file:///runbooks/{service}.log",
            mime_type="text/plain",
            blob=base64.b64encode(b"\xff\xfe caf\xe9").decode(),
        )
        return [EmbeddedResource(resource=r) for r in (text, blob, latin)]

    @server.tool(description="Architecture diagram.", structured_output=False)
    def diagram() -> list:
        svg = ImageContent(data=base64.b64encode(b"<svg/>").decode(), mime_type="image/svg+xml")
        return [svg, ImageContent(data="not*base64!", mime_type="image/png")]

    @server.tool(description="Migrate the rows, reporting progress.")
    async def migrate(hold: str, ctx: Context) -> str:
        await ctx.report_progress(1, 3, "copying rows\x1b[2J")
        await ctx.report_progress(2, 3, "checking rows")
        with anyio.fail_after(60):
            while not await anyio.Path(hold).exists():  # noqa: ASYNC110 - another process
                await anyio.sleep(0.05)
        await ctx.report_progress(3, 3, "done")
        return "migrated"

    @server.tool(description="Talk on stderr and stdout.")
    def chatter() -> str:
        token = os.environ.get("RICH_TOKEN", "")
        sys.stderr.write(f"DEBUG connecting with token {token}\n")
        sys.stderr.flush()
        sys.stdout.write(f"hello from the server, token={token}\n")
        sys.stdout.flush()
        return "chatted"

    @server.tool(description="Sleep, then answer.")
    async def nap(seconds: float) -> str:
        await anyio.sleep(seconds)
        return "awake"

    @server.tool(description="Restart one service, asking the user for a window first.")
    async def restart(
        service: str,
        window: Annotated[ElicitationResult[RestartWindow], Resolve(ask_window)],
        pretend: str = "",
    ) -> str:
        if window.action != "accept":
            return f"restart of {service}: {window.action}"
        data = window.data
        return f"restart of {service}: {data.minutes} min, {data.reason!r}, {data.decision}"

    @server.tool(name=TASK_ONLY, description="Export everything (runs as a task).")
    def background_export() -> str:
        return "exported"

    return server


async def serve_http(server: MCPServer, port: int) -> None:
    """Bind first (port 0: a free one), announce the port, then serve on that socket."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(64)
    print(f"PORT={sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(server.streamable_http_app(), log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve(sockets=[sock])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", action="store_true", help="streamable HTTP instead of stdio")
    parser.add_argument("--port", type=int, default=0, help="HTTP port (0: a free one)")
    parser.add_argument("--legacy", action="store_true", help="refuse server/discover")
    args = parser.parse_args(argv)
    server = build_server(legacy=args.legacy)
    if args.http:
        anyio.run(serve_http, server, args.port)
    else:
        server.run("stdio")


if __name__ == "__main__":
    sys.exit(main())
