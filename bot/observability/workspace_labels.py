"""The `workspace` label's values, bounded: a deployment with thousands of workspaces must not
make thousands of series per metric. The first `limit` workspaces seen keep their names (per
platform, as `platform`/`workspace` pairs count together); every later one is `other`, and with
`limit` 0 no workspace is named (`all`). First seen, not busiest: a series' name never changes
under a scraper, which top-N by traffic would do (and Prometheus can rank the named ones)."""

from __future__ import annotations

import re

OTHER = "other"
ALL = "all"  # the label's only value when per-workspace series are turned off
DEFAULT_LIMIT = 50
_ID = re.compile(r"[A-Za-z0-9_.:-]{1,64}")  # team ids, tenant keys, `local`


class WorkspaceLabels:
    """(platform, workspace) -> the workspace label's value."""

    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        self.limit = limit
        self._named: set[tuple[str, str]] = set()

    def __call__(self, platform: str, workspace: str | None) -> str:
        if self.limit <= 0:
            return ALL
        workspace = workspace or "none"  # the bot's own single workspace ('' stored)
        key = (platform, workspace)
        if key in self._named:
            return workspace
        if len(self._named) >= self.limit or not _ID.fullmatch(workspace):
            return OTHER
        self._named.add(key)
        return workspace
