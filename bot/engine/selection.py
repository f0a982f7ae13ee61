"""Tool selection: with many tools, one cheap call picks the few the query needs.

Above `tool_selection_threshold` tools, the model sees a compact catalogue (name + one line, no
schemas, grouped by connector) and picks at most `tool_selection_max`. The catalogue fits
`tool_catalogue_max_chars`: when every tool's line does not, a local search
(`bot.engine.tool_search`) keeps the lines of the tools the request's words point at first,
and the catalogue says how many it left out. Failure is never fatal: unparseable output, no
valid name, or any exception falls back to every tool when they fit in one model request
(`max_tools_per_request`, `tool_schemas_max_chars`), else to the best-ranked that fit, so a
run with thousands of tools never sends a request the model refuses.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass

from bot.engine import prompts
from bot.engine.agent_limits import EngineLimits
from bot.engine.events import TokenUsage
from bot.engine.llm import LLM
from bot.engine.structured import structured_llm_call
from bot.engine.tool_search import rank
from bot.engine.tools import Tool, ToolRegistry

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Selection:
    tools: ToolRegistry
    selected: bool  # False: the full set or the fallback (below the threshold, or it failed)
    usage: TokenUsage = TokenUsage()


def needs_selection(tools: ToolRegistry, limits: EngineLimits) -> bool:
    return len(tools) > limits.tool_selection_threshold or not fits_one_request(tools, limits)


def fits_one_request(tools: Iterable[Tool], limits: EngineLimits) -> bool:
    listed = list(tools)
    if len(listed) > limits.max_tools_per_request:
        return False
    return sum(_schema_chars(tool) for tool in listed) <= limits.tool_schemas_max_chars


def _schema_chars(tool: Tool) -> int:
    return len(json.dumps(tool.openai_schema(), ensure_ascii=False, separators=(",", ":")))


def catalogue(query: str, tools: ToolRegistry, max_chars: int) -> str:
    """Name and one line per tool, grouped by connector; cut to `max_chars` by relevance."""
    lines = {tool.name: f"- {tool.name}: {tool.summary}" for tool in tools}
    total = sum(len(line) + 1 for line in lines.values())
    shown: set[str] = set(lines)
    if total > max_chars:
        shown, used = set(), 0
        for tool in rank(query, tools):
            cost = len(lines[tool.name]) + 1 + len(tool.connector) + 8  # and its heading
            if used + cost > max_chars:
                break
            shown.add(tool.name)
            used += cost
    groups: dict[str, list[str]] = {}
    for tool in tools:
        if tool.name in shown:
            groups.setdefault(tool.connector or "built-in", []).append(lines[tool.name])
    parts = [f"## {connector}\n" + "\n".join(group) for connector, group in groups.items()]
    left_out = len(tools) - len(shown)
    if left_out:
        parts.append(f"({left_out} more tools not shown: they match the request less well)")
    return "\n".join(parts)


def fallback(query: str, tools: ToolRegistry, limits: EngineLimits) -> ToolRegistry:
    """Every tool when they fit in one request; else the best-ranked for `query` that fit."""
    if fits_one_request(tools, limits):
        return tools
    kept: list[str] = []
    used = 0
    for tool in rank(query, tools):
        size = _schema_chars(tool)
        if len(kept) == limits.max_tools_per_request - 1:  # room for `request_tools`
            break
        if used + size > limits.tool_schemas_max_chars:
            continue
        kept.append(tool.name)
        used += size
    return tools.subset(kept)


async def select_tools(
    llm: LLM, query: str, tools: ToolRegistry, limits: EngineLimits
) -> Selection:
    """The subset for `query`, or the fallback set on any failure."""
    if not needs_selection(tools, limits):
        return Selection(tools, selected=False)
    message = prompts.SELECTION_PROMPT.format(
        limit=limits.tool_selection_max,
        catalogue=catalogue(query, tools, limits.tool_catalogue_max_chars),
        query=query,
    )
    try:
        result = await structured_llm_call(
            llm,
            [prompts.user(message)],
            prompts.SELECTION_SCHEMA,
            name="select_tools",
            description="The names of the tools relevant to the request.",
            default_value=None,
        )
    except Exception:  # noqa: BLE001 - selection failure is never fatal: use the fallback
        kept = fallback(query, tools, limits)
        log.warning("tool selection failed; using %d of %d tools", len(kept), len(tools),
                    exc_info=True)  # fmt: skip
        return Selection(kept, selected=False)
    names = _valid_names(result.raw, tools, limits.tool_selection_max)
    if not names:
        kept = fallback(query, tools, limits)
        log.info("tool selection gave no valid tool name; using %d of %d tools",
                 len(kept), len(tools))  # fmt: skip
        return Selection(kept, selected=False, usage=result.usage)
    return Selection(tools.subset(names), selected=True, usage=result.usage)


def _valid_names(raw: dict | None, tools: ToolRegistry, limit: int) -> list[str]:
    if not raw or not isinstance(raw.get("tools"), list):
        return []
    names: list[str] = []
    for name in raw["tools"]:
        if isinstance(name, str) and name in tools and name not in names:
            names.append(name)
    return names[:limit]
