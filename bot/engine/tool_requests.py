"""`request_tools`: the way out of a wrong selection.

When selection narrowed a run's tools (a pick of a few out of many, or the best-ranked that fit
in one request), the run is also offered `request_tools`: the model describes what it is
missing and the engine adds the tools a local search finds for it (`bot.engine.tool_search`),
at most `tool_selection_max` a time and never past `max_tools_per_request` nor
`tool_schemas_max_chars` (one model request's limits), to the run's tools
for the following turns. It is the engine's own step, not a connector call: no hook sees it
and it changes nothing outside the run; each tool it adds is still gated like any other.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from bot.engine.scope import RunScope
from bot.engine.selection import schema_chars
from bot.engine.tool_search import matching
from bot.engine.tools import Tool, ToolResult

REQUEST_TOOLS = "request_tools"


async def _not_here(args: dict[str, Any]) -> ToolResult:
    return ToolResult.error("request_tools is answered by the engine")


def request_tools_tool() -> Tool:
    """The meta-tool as the model sees it."""
    return Tool(
        name=REQUEST_TOOLS,
        description=(
            "Ask for more tools when none of yours fits the task: describe the action you need "
            "(system, object, verb). Matching tools are added for your next turns."
        ),
        parameters={
            "type": "object",
            "properties": {"query": {"type": "string", "description": "what the tool must do"}},
            "required": ["query"],
        },
        invoke=_not_here,
    )


def _fitting(tools: Iterable[Tool], *, count: int, chars: int) -> list[Tool]:
    """The first `count` of `tools` whose schemas fit in `chars` together (one request's)."""
    found: list[Tool] = []
    for tool in tools:
        if len(found) >= count:
            break
        size = schema_chars(tool)
        if size <= chars:
            found.append(tool)
            chars -= size
    return found


def grant_tools(scope: RunScope, args: dict[str, Any]) -> ToolResult:
    """Add the pool's tools that match `args["query"]` to the run; say which were added."""
    query = args.get("query")
    if not isinstance(query, str) or not query.strip():
        return ToolResult.error("request_tools needs a `query`: what the tool must do.")
    pool = scope.pool if scope.pool is not None else scope.tools
    limits = scope.limits
    room = min(limits.tool_selection_max, limits.max_tools_per_request - len(scope.tools))
    candidates = [tool for tool in matching(query, pool) if tool.name not in scope.tools]
    if not candidates:
        return ToolResult.error(f"No other tool matches {query[:200]!r}.")
    used = sum(schema_chars(tool) for tool in scope.tools)
    found = _fitting(candidates, count=room, chars=limits.tool_schemas_max_chars - used)
    if not found:
        return ToolResult.error(
            f"No room for more tools: this run has {len(scope.tools)}, as many as one model "
            "request may carry. Use them, or answer with what you found."
        )
    for tool in found:
        scope.tools.register(tool)
    scope.schemas = scope.tools.openai_schemas()
    scope.state.tool_names = scope.tools.names()
    lines = "\n".join(f"- {tool.name}: {tool.summary}" for tool in found)
    return ToolResult(f"Added {len(found)} tool(s), callable from now on:\n{lines}")
