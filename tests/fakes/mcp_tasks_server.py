"""A stdio MCP server of the 2025-11-25 era, written out by hand: the SDK's own server agrees
on 2026-07-28 with the SDK's client, and there a tool's `execution` is not sent.

    python tests/fakes/mcp_tasks_server.py

It answers `initialize` (protocol 2025-11-25), `tools/list` with `ping` (plain) and
`background_export` (`execution.taskSupport: required`), `tools/call` of `ping`, and any other
request with METHOD_NOT_FOUND (so a client's `server/discover` probe falls back to initialize).
"""

from __future__ import annotations

import json
import sys

TOOLS = [
    {"name": "ping", "description": "Answer pong.",
     "inputSchema": {"type": "object", "properties": {}}},
    {"name": "background_export", "description": "Export everything (runs as a task).",
     "inputSchema": {"type": "object", "properties": {}},
     "execution": {"taskSupport": "required"}},
]  # fmt: skip


def answer(request: dict) -> dict:
    method = request["method"]
    if method == "initialize":
        return {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                "serverInfo": {"name": "tasks", "version": "1"}}  # fmt: skip
    if method == "tools/list":
        return {"tools": TOOLS}
    if method == "tools/call" and request["params"]["name"] == "ping":
        return {"content": [{"type": "text", "text": "pong"}]}
    raise LookupError(method)


def main() -> None:
    for line in sys.stdin:
        request = json.loads(line)
        if "id" not in request:
            continue  # a notification
        reply: dict = {"jsonrpc": "2.0", "id": request["id"]}
        try:
            reply["result"] = answer(request)
        except LookupError as exc:
            reply["error"] = {"code": -32601, "message": f"Method not found: {exc}"}
        print(json.dumps(reply), flush=True)


if __name__ == "__main__":
    main()
