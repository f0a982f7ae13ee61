"""The selection catalogue: one line per tool, grouped by connector and topic, within a budget.

The selection call (`bot.engine.selection`) shows the model tools by name and one line, never
their schemas. Imported APIs are big (GitHub alone: 1,223 actions, 156 KB of lines), so:
- tools are grouped by connector and, within it, by their first tag (an imported operation's
  OpenAPI tag): `## github/issues`;
- a listing that does not fit its budget keeps the tools a local search ranks first
  (`bot.engine.tool_search`) and says how many it left out;
- when even that would hide most tools, the model first sees an index of the groups (name,
  size, a few of their actions) to choose from. Pure functions over the tools, no state.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from bot.engine.tools import Tool

BUILT_IN = "built-in"  # the group of tools that belong to no connector
SAMPLE_CHARS = 120  # the actions named on one group's index line
LEFT_OUT_NOTE = "({count} more {what} not shown: they match the request less well)"
_NOTE_ROOM = 90  # what the left-out note takes, kept free in every budget


@dataclass(frozen=True)
class Listing:
    """A catalogue text and what it shows of the whole."""

    text: str
    shown: int
    left_out: int


def group_of(tool: Tool) -> str:
    """`connector/first tag`, or the connector alone for a tool without tags."""
    connector = tool.connector or BUILT_IN
    return f"{connector}/{tool.tags[0]}" if tool.tags else connector


def groups_of(tools: Iterable[Tool]) -> dict[str, list[Tool]]:
    """The tools by group, groups and tools in their first order."""
    found: dict[str, list[Tool]] = {}
    for tool in tools:
        found.setdefault(group_of(tool), []).append(tool)
    return found


def tool_line(tool: Tool) -> str:
    return f"- {tool.name}: {tool.summary}"


def listing_chars(tools: Iterable[Tool]) -> int:
    """The length of the whole grouped listing of `tools` (no cut)."""
    total = 0
    for group, members in groups_of(tools).items():
        total += len(group) + 4 + sum(len(tool_line(tool)) + 1 for tool in members)
    return total


def tool_listing(tools: Sequence[Tool], ranked: Iterable[Tool], max_chars: int) -> Listing:
    """Every tool under its group's heading when they fit in `max_chars`; else those of
    `ranked` (the same tools, best first) that fit, in `tools`' order, and a note."""
    if listing_chars(tools) <= max_chars:
        shown = {tool.name for tool in tools}
    else:
        shown = _fill(ranked, max_chars - _NOTE_ROOM)
    parts = [
        f"## {group}\n" + "\n".join(tool_line(tool) for tool in members)
        for group, members in groups_of(t for t in tools if t.name in shown).items()
    ]
    left_out = len(tools) - len(shown)
    if left_out:
        parts.append(LEFT_OUT_NOTE.format(count=left_out, what="tools"))
    return Listing("\n".join(parts), len(shown), left_out)


def _fill(ranked: Iterable[Tool], room: int) -> set[str]:
    """The names of the first tools of `ranked` whose lines (and headings) fit in `room`."""
    shown: set[str] = set()
    headed: set[str] = set()
    used = 0
    for tool in ranked:
        group = group_of(tool)
        cost = len(tool_line(tool)) + 1 + (0 if group in headed else len(group) + 4)
        if used + cost > room:
            if room - used < 40:  # no line fits in what is left
                break
            continue
        shown.add(tool.name)
        headed.add(group)
        used += cost
    return shown


def index_line(group: str, members: Sequence[Tool]) -> str:
    """`- github/issues (42 tools): list_issues, get_issue, ...` (a few actions, cut)."""
    sample: list[str] = []
    used = 0
    for tool in members:
        action = tool.action or tool.name
        if used + len(action) + 2 > SAMPLE_CHARS:
            sample.append("...")
            break
        sample.append(action)
        used += len(action) + 2
    count = f"{len(members)} tool{'s' if len(members) != 1 else ''}"
    return f"- {group} ({count}): {', '.join(sample)}"


def group_index(groups: dict[str, list[Tool]], ranked: Sequence[str], max_chars: int) -> Listing:
    """One line per group in `groups`' order; when they do not fit in `max_chars`, those of
    `ranked` (group names, best first) that do, and a note."""
    lines = {group: index_line(group, members) for group, members in groups.items()}
    if sum(len(line) + 1 for line in lines.values()) <= max_chars:
        shown = set(lines)
    else:
        shown, used = set(), 0
        for group in ranked:
            cost = len(lines[group]) + 1
            if used + cost <= max_chars - _NOTE_ROOM:
                shown.add(group)
                used += cost
    text = "\n".join(line for group, line in lines.items() if group in shown)
    left_out = len(lines) - len(shown)
    if left_out:
        text += "\n" + LEFT_OUT_NOTE.format(count=left_out, what="groups")
    return Listing(text, len(shown), left_out)
