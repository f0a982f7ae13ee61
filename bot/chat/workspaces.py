"""Per-workspace settings as the services read them: which connectors a workspace's runs may
use and how many runs one person may have at once there (`CHATOPS_WORKSPACES_FILE`, parsed and
checked by `bot.workspaces`). A workspace is a (platform, workspace) pair: the Slack team, the
Feishu tenant key, `local` for the console; one not listed gets the default entry."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class WorkspacePolicy:
    """What applies in one workspace; None: the process-wide setting."""

    connectors: frozenset[str] | None = None  # the only connectors its runs may use
    max_active_runs_per_user: int | None = None

    def narrow(self, connectors: frozenset[str] | None) -> frozenset[str] | None:
        """A run's connectors (a trigger's list, or None for all) within this workspace's."""
        if self.connectors is None:
            return connectors
        return self.connectors if connectors is None else connectors & self.connectors


@dataclass(frozen=True)
class WorkspacePolicies:
    """Every listed workspace's policy and the default for the rest."""

    default: WorkspacePolicy = WorkspacePolicy()
    listed: Mapping[tuple[str, str], WorkspacePolicy] = field(default_factory=dict)

    def for_workspace(self, platform: str, workspace: str) -> WorkspacePolicy:
        return self.listed.get((platform, workspace), self.default)
