"""Tool selection: with many tools, one cheap call picks the few the query needs.

Above `tool_selection_threshold` tools, the model sees a compact catalogue (name + one line, no
schemas) and picks at most `tool_selection_max`. Failure is never fatal: unparseable output, no
valid name, or any exception falls back to the full set (more context, same abilities).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from bot.engine import prompts
from bot.engine.agent_limits import EngineLimits
from bot.engine.events import TokenUsage
from bot.engine.llm import LLM
from bot.engine.structured import structured_llm_call
from bot.engine.tools import ToolRegistry

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Selection:
    tools: ToolRegistry
    selected: bool  # False: the full set (below the threshold, or the selection failed)
    usage: TokenUsage = TokenUsage()


def needs_selection(tools: ToolRegistry, limits: EngineLimits) -> bool:
    return len(tools) > limits.tool_selection_threshold


async def select_tools(
    llm: LLM, query: str, tools: ToolRegistry, limits: EngineLimits
) -> Selection:
    """The subset for `query`, or the full registry on any failure."""
    if not needs_selection(tools, limits):
        return Selection(tools, selected=False)
    message = prompts.SELECTION_PROMPT.format(
        limit=limits.tool_selection_max, catalogue=tools.catalogue(), query=query
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
    except Exception:  # noqa: BLE001 - selection failure is never fatal: use every tool
        log.warning("tool selection failed; using all %d tools", len(tools), exc_info=True)
        return Selection(tools, selected=False)
    names = _valid_names(result.raw, tools, limits.tool_selection_max)
    if not names:
        log.info("tool selection gave no valid tool name; using all %d tools", len(tools))
        return Selection(tools, selected=False, usage=result.usage)
    return Selection(tools.subset(names), selected=True, usage=result.usage)


def _valid_names(raw: dict | None, tools: ToolRegistry, limit: int) -> list[str]:
    if not raw or not isinstance(raw.get("tools"), list):
        return []
    names: list[str] = []
    for name in raw["tools"]:
        if isinstance(name, str) and name in tools and name not in names:
            names.append(name)
    return names[:limit]
