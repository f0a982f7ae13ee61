"""A local search over tools: which ones a request's words point at, best first.

Selection asks the model to pick from a catalogue; thousands of imported actions do not fit in
one prompt (GitHub alone: 1,223 actions, a 156 KB catalogue), and a failed selection must not
send them all (OpenAI refuses more than 128 tools). This ranks tools by the words they share
with the request (name, connector and tags count twice, then the description), without a model call,
so the catalogue can be cut to its budget and a fallback stays small. Pure functions, no state.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from bot.engine.tools import Tool

_WORD = re.compile(r"[a-z0-9]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
# words too common in requests and descriptions to tell tools apart
_STOP = frozenset({
    "a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "get", "in", "is", "it",
    "of", "on", "or", "please", "the", "this", "to", "with",
})  # fmt: skip


def words(text: str) -> set[str]:
    """Lower-case words of `text`, camelCase and snake_case split, common words left out."""
    split = _CAMEL.sub(" ", text).lower()
    return {w for w in _WORD.findall(split) if w not in _STOP}


def _score(query: set[str], tool: Tool) -> int:
    named = words(f"{tool.name} {tool.connector} {tool.action} {' '.join(tool.tags)}")
    described = words(tool.description[:300])
    return 2 * len(query & named) + len(query & described)


def rank(query: str, tools: Iterable[Tool]) -> list[Tool]:
    """Every tool, the best matches for `query` first; ties (and no match) keep their order."""
    wanted = words(query)
    listed = list(tools)
    if not wanted:
        return listed
    scored = [(-_score(wanted, tool), index, tool) for index, tool in enumerate(listed)]
    scored.sort(key=lambda entry: (entry[0], entry[1]))
    return [tool for _, _, tool in scored]


def matching(query: str, tools: Iterable[Tool]) -> list[Tool]:
    """Only the tools that share a word with `query`, best first."""
    wanted = words(query)
    scored = [(_score(wanted, tool), index, tool) for index, tool in enumerate(tools)]
    return [tool for score, _, tool in sorted(scored, key=lambda e: (-e[0], e[1])) if score > 0]


def rank_groups(query: str, groups: Mapping[str, Sequence[Tool]]) -> list[str]:
    """Group names, best first: the words a group's name shares with `query` count twice, then
    its best-matching tool's score; ties (and no match) keep their order."""
    wanted = words(query)
    if not wanted:
        return list(groups)
    scored = [
        (-(2 * len(wanted & words(group)) + max((_score(wanted, t) for t in members), default=0)),
         index, group)
        for index, (group, members) in enumerate(groups.items())
    ]  # fmt: skip
    scored.sort(key=lambda entry: (entry[0], entry[1]))
    return [group for _, _, group in scored]
