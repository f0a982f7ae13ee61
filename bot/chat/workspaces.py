"""Per-workspace settings as the services read them: which connectors a workspace's runs may
use, how many runs one person may have at once there, who may decide its approvals and who
may read its audit reports (`CHATOPS_WORKSPACES_FILE`, parsed and checked by
`bot.workspaces`). A workspace is a (platform, workspace) pair: the Slack team, the Feishu
tenant key, `local` for the console; one not listed gets the default entry."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class WorkspacePolicy:
    """What applies in one workspace; None: the process-wide setting."""

    connectors: frozenset[str] | None = None  # the only connectors its runs may use
    max_active_runs_per_user: int | None = None
    # the only people (user ids or group names) who may decide approvals there; it narrows
    # the manifest's `approvers`, never widens them
    approvers: tuple[str, ...] | None = None
    # replaces `CHATOPS_APPROVER_GROUPS` there (the manifest's group names resolve to these)
    approver_groups: Mapping[str, list[str]] | None = None
    audit_viewers: frozenset[str] | None = None  # replaces `CHATOPS_AUDIT_VIEWERS` there

    def narrow(self, connectors: frozenset[str] | None) -> frozenset[str] | None:
        """A run's connectors (a trigger's list, or None for all) within this workspace's."""
        if self.connectors is None:
            return connectors
        return self.connectors if connectors is None else connectors & self.connectors

    def groups(self, process_wide: Mapping[str, list[str]]) -> Mapping[str, list[str]]:
        """The approver groups that apply here: the workspace's own, else the process's."""
        return process_wide if self.approver_groups is None else self.approver_groups

    def may_view_audit(self, process_wide: list[str], user_id: str) -> bool:
        """Whether `user_id` may read audit reports here (nobody unknown ever may)."""
        viewers = self.audit_viewers if self.audit_viewers is not None else process_wide
        return bool(user_id) and user_id in viewers


@dataclass(frozen=True)
class WorkspacePolicies:
    """Every listed workspace's policy and the default for the rest."""

    default: WorkspacePolicy = WorkspacePolicy()
    listed: Mapping[tuple[str, str], WorkspacePolicy] = field(default_factory=dict)

    def for_workspace(self, platform: str, workspace: str) -> WorkspacePolicy:
        return self.listed.get((platform, workspace), self.default)
