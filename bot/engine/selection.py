"""Tool selection: with many tools, one cheap call picks the few the query needs.

Above `tool_selection_threshold` tools (or more than fit in one model request), the model sees
a catalogue (`bot.engine.catalogue`: name and one line per tool, no schemas, grouped by
connector and OpenAPI tag) and picks at most `tool_selection_max`. Every selection request
fits `tool_catalogue_max_tokens`:
1. when the whole grouped catalogue fits, one call picks from it;
2. when it does not (thousands of imported actions), a first call browses: the model sees an
   index of the groups (name, size, a few actions) and names the groups to open and words to
   search for; the second call picks from those groups' tools and the search's finds, cut to
   the budget by a local search (`bot.engine.tool_search`) if they are still too many.
Failure is never fatal and never sends every tool: unparseable output, no valid name, or any
exception falls back to every tool only when they all fit in one model request
(`max_tools_per_request`, `tool_schemas_max_chars`), else to the best-ranked that fit (those
the browse step chose first), and the run gets `request_tools` to ask for what is missing.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from bot.engine import prompts
from bot.engine.agent_limits import EngineLimits
from bot.engine.catalogue import group_index, groups_of, listing_chars, tool_listing
from bot.engine.context import CHARS_PER_TOKEN
from bot.engine.events import TokenUsage
from bot.engine.llm import LLM
from bot.engine.structured import structured_llm_call
from bot.engine.tool_search import matching, rank, rank_groups
from bot.engine.tools import Tool, ToolRegistry

log = logging.getLogger(__name__)
SEARCH_CHARS = 200  # the browse step's search words, at most
SEARCH_FINDS = 60  # tools the browse step's search adds to the chosen groups', at most


@dataclass(frozen=True)
class Selection:
    tools: ToolRegistry
    selected: bool  # False: the full set or the fallback (below the threshold, or it failed)
    usage: TokenUsage = TokenUsage()


@dataclass(frozen=True)
class _Browse:
    """What the browse step chose: the candidate tools (None: nothing valid) and search words."""

    tools: ToolRegistry | None
    search: str
    usage: TokenUsage


def needs_selection(tools: ToolRegistry, limits: EngineLimits) -> bool:
    return len(tools) > limits.tool_selection_threshold or not fits_one_request(tools, limits)


def fits_one_request(tools: Iterable[Tool], limits: EngineLimits) -> bool:
    listed = list(tools)
    if len(listed) > limits.max_tools_per_request:
        return False
    return sum(schema_chars(tool) for tool in listed) <= limits.tool_schemas_max_chars


def schema_chars(tool: Tool) -> int:
    """The size of the tool's entry in a model request's `tools` (what the budget counts)."""
    return len(json.dumps(tool.openai_schema(), ensure_ascii=False, separators=(",", ":")))


def catalogue_room(template: str, query: str, limits: EngineLimits) -> int:
    """Characters left for the catalogue in a selection prompt built from `template`, so the
    whole prompt fits `tool_catalogue_max_tokens` (at least a quarter of it, whatever the
    query's length: a selection needs a catalogue)."""
    budget = limits.tool_catalogue_max_tokens * CHARS_PER_TOKEN
    frame = len(template) + len(query) + 40  # the placeholders' values but the catalogue
    return max(budget - frame, budget // 4)


def fallback(query: str, tools: ToolRegistry, limits: EngineLimits,
             first: Iterable[Tool] = ()) -> ToolRegistry:  # fmt: skip
    """Every tool when they fit in one request; else `first`, then the best-ranked for
    `query`, as many as fit (with room left for `request_tools`)."""
    if fits_one_request(tools, limits):
        return tools
    preferred = list(first)
    chosen = {tool.name for tool in preferred}
    ordered = [*rank(query, preferred), *(t for t in rank(query, tools) if t.name not in chosen)]
    kept: list[str] = []
    used = 0
    for tool in ordered:
        if len(kept) == limits.max_tools_per_request - 1:  # room for `request_tools`
            break
        size = schema_chars(tool)
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
    room = catalogue_room(prompts.SELECTION_PROMPT, query, limits)
    candidates, words, usage = tools, query, TokenUsage()
    if listing_chars(tools) > room:  # too many to list: browse the groups first
        browse = await _browse(llm, query, tools, limits)
        usage = usage + browse.usage
        words = f"{query} {browse.search}".strip()
        if browse.tools is not None:
            candidates = browse.tools
    listed = list(candidates)
    message = prompts.SELECTION_PROMPT.format(
        limit=limits.tool_selection_max,
        catalogue=tool_listing(listed, rank(words, listed), room).text,
        query=query,
    )
    raw = await _ask(llm, message, prompts.SELECTION_SCHEMA, "select_tools",
                     "The names of the tools relevant to the request.")  # fmt: skip
    if raw is not None:
        usage = usage + raw[1]
    names = _valid_names(raw[0] if raw else None, tools, limits.tool_selection_max)
    if not names:
        kept = fallback(words, tools, limits, first=() if candidates is tools else candidates)
        log.info("tool selection gave no valid tool name; using %d of %d tools",
                 len(kept), len(tools))  # fmt: skip
        return Selection(kept, selected=False, usage=usage)
    return Selection(tools.subset(names), selected=True, usage=usage)


async def _browse(llm: LLM, query: str, tools: ToolRegistry, limits: EngineLimits) -> _Browse:
    """The first of two selection calls: which groups to open, which words to search for."""
    groups = groups_of(tools)
    room = catalogue_room(prompts.BROWSE_PROMPT, query, limits)
    index = group_index(groups, rank_groups(query, groups), room)
    message = prompts.BROWSE_PROMPT.format(
        tools=len(tools), groups=len(groups), limit=limits.tool_selection_max,
        index=index.text, query=query,
    )  # fmt: skip
    raw = await _ask(llm, message, prompts.BROWSE_SCHEMA, "select_tool_groups",
                     "The groups to open and the words to search for.")  # fmt: skip
    if raw is None:
        return _Browse(None, "", TokenUsage())
    answer, usage = raw
    search = answer.get("search") if isinstance(answer, Mapping) else None
    search = " ".join(search.split())[:SEARCH_CHARS] if isinstance(search, str) else ""
    chosen = _valid_groups(answer, groups, limits.tool_selection_max)
    names = [tool.name for group in chosen for tool in groups[group]]
    if search:
        names += [tool.name for tool in matching(search, tools)[:SEARCH_FINDS]]
    if not names:
        log.info("tool browsing chose no valid group and found nothing; searching the request")
        return _Browse(None, search, usage)
    return _Browse(tools.subset(names), search, usage)


async def _ask(
    llm: LLM, message: str, schema: Mapping[str, Any], name: str, description: str
) -> tuple[dict[str, Any], TokenUsage] | None:
    """One structured selection call: its raw answer and usage (None on any failure)."""
    try:
        result = await structured_llm_call(
            llm, [prompts.user(message)], schema, name=name, description=description,
            default_value=None,
        )  # fmt: skip
    except Exception:  # noqa: BLE001 - selection failure is never fatal: use the fallback
        log.warning("tool selection call %s failed", name, exc_info=True)
        return None
    return (result.raw or {}), result.usage


def _valid_groups(raw: Mapping[str, Any], groups: Mapping[str, Any], limit: int) -> list[str]:
    """The answer's group names that exist (case aside), each once, at most `limit`."""
    wanted = raw.get("groups")
    if not isinstance(wanted, list):
        return []
    by_lower = {group.lower(): group for group in groups}
    chosen: list[str] = []
    for name in wanted:
        group = by_lower.get(name.strip().lower()) if isinstance(name, str) else None
        if group is not None and group not in chosen:
            chosen.append(group)
    return chosen[:limit]


def _valid_names(raw: dict | None, tools: ToolRegistry, limit: int) -> list[str]:
    if not raw or not isinstance(raw.get("tools"), list):
        return []
    names: list[str] = []
    for name in raw["tools"]:
        if isinstance(name, str) and name in tools and name not in names:
            names.append(name)
    return names[:limit]
