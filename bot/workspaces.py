"""`CHATOPS_WORKSPACES_FILE`: per-workspace settings, read and checked like manifests.

```yaml
default:                         # workspaces not listed (optional; default: no limits)
  connectors: [github]
workspaces:
  - platform: feishu             # slack | feishu | console
    workspace: 2ed263bf32cf1651  # the Slack team id, the Feishu tenant key, `local`
    connectors: [ops, github]    # the only connectors its runs may use (omitted: all)
    max_active_runs_per_user: 2  # omitted: CHATOPS_MAX_ACTIVE_RUNS_PER_USER
    approvers: [U0LEAD, oncall]  # only these may decide its approvals (narrows the manifest's)
    approver_groups:             # replaces CHATOPS_APPROVER_GROUPS in this workspace
      oncall: [U0BEN, U0CAT]
    audit_viewers: [U0DEV]       # replaces CHATOPS_AUDIT_VIEWERS in this workspace
```

Unknown fields, connectors no manifest declares, bad limits and badly shaped people lists are
refused with the file, line and field (`chatops workspaces validate`, and `chatops serve` at
start-up). User ids nobody knows are fine: the platform is not asked.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Annotated, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from bot.chat.workspaces import WorkspacePolicies, WorkspacePolicy
from bot.config import load_settings
from bot.errors import ConfigError
from connectors.loading import YAML_LOADER, load_manifest_dir, yaml_line, yaml_problems
from connectors.manifest import ManifestError

_Name = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200)]


class _Policy(BaseModel):
    model_config = ConfigDict(extra="forbid")

    connectors: list[str] | None = None
    max_active_runs_per_user: int | None = Field(None, ge=1)
    approvers: list[_Name] | None = None
    approver_groups: dict[_Name, list[_Name]] | None = None
    audit_viewers: list[_Name] | None = None


class _Entry(_Policy):
    platform: Literal["slack", "feishu", "console"]
    workspace: str = Field(min_length=1)


class _File(BaseModel):
    model_config = ConfigDict(extra="forbid")

    default: _Policy = _Policy()
    workspaces: list[_Entry] = []


def load_workspaces(path: Path | None, manifests_dir: Path | None) -> WorkspacePolicies:
    """The policies of `path` (none: the default for every workspace); ConfigError naming the
    file, line and field of each problem. `manifests_dir`: where the connector names that
    `connectors` may use come from (None: not checked)."""
    if path is None:
        return WorkspacePolicies()
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"CHATOPS_WORKSPACES_FILE {path}: cannot read it ({exc})") from None
    try:
        raw = yaml.load(text, Loader=YAML_LOADER)  # noqa: S506 - a safe loader
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise ConfigError(f"{path}{f':{mark.line + 1}' if mark else ''}: not valid YAML") from None
    try:
        parsed = _File.model_validate(raw if raw is not None else {})
    except ValidationError as exc:
        raise ConfigError(yaml_problems(path, text, exc)) from None
    known = _connector_names(manifests_dir)
    problems = []
    places: list[tuple[tuple[str | int, ...], _Policy]] = [(("default",), parsed.default)]
    places += [(("workspaces", i), entry) for i, entry in enumerate(parsed.workspaces)]
    seen: set[tuple[str, str]] = set()
    for loc, policy in places:
        for j, name in enumerate(policy.connectors or []):
            if known is not None and name not in known:
                where = yaml_line(text, (*loc, "connectors", j))
                problems.append(f"{path}{where}: unknown connector {name!r} (no manifest has it)")
        if isinstance(policy, _Entry):
            key = (policy.platform, policy.workspace)
            if key in seen:
                problems.append(f"{path}{yaml_line(text, loc)}: {key[0]} {key[1]} is listed twice")
            seen.add(key)
    if problems:
        raise ConfigError("\n".join(problems))
    return WorkspacePolicies(
        default=_policy(parsed.default),
        listed={(e.platform, e.workspace): _policy(e) for e in parsed.workspaces},
    )


def _policy(policy: _Policy) -> WorkspacePolicy:
    connectors = frozenset(policy.connectors) if policy.connectors is not None else None
    viewers = policy.audit_viewers
    return WorkspacePolicy(
        connectors,
        policy.max_active_runs_per_user,
        approvers=tuple(policy.approvers) if policy.approvers is not None else None,
        approver_groups=policy.approver_groups,
        audit_viewers=frozenset(viewers) if viewers is not None else None,
    )


def _connector_names(manifests_dir: Path | None) -> set[str] | None:
    """The connectors the manifests declare; None when they cannot be read (the start-up
    reports that itself)."""
    if manifests_dir is None:
        return None
    try:
        return {manifest.name for _, manifest in load_manifest_dir(Path(manifests_dir))}
    except (ManifestError, OSError):
        return None


def workspaces_command(args: argparse.Namespace) -> int:
    """`chatops workspaces validate [FILE]`: 0 and a summary when the file is good; a bad one
    raises ConfigError (the CLI prints it, exit 2)."""
    settings = load_settings()
    path = Path(args.file) if args.file else settings.chatops_workspaces_file
    if path is None:
        raise ConfigError("no file: give FILE or set CHATOPS_WORKSPACES_FILE")
    manifests = Path(args.manifests) if args.manifests else settings.chatops_manifests_dir
    policies = load_workspaces(path, manifests)
    print(f"ok: {path}: {len(policies.listed)} workspace(s) and a default")
    return 0
