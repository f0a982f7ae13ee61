"""`chatops manifests explain FILE ACTION --args '{...}'`: which rule a call would match, and the
policy that results, so a reviewer can test a policy without running anything.

The call is resolved exactly as the approval gate resolves it (`bot.approvals.rules.resolve`)
with the requesters, channel, platform and time given on the command line.
"""

from __future__ import annotations

import argparse
import json
from datetime import datetime
from pathlib import Path
from typing import TextIO

from bot.approvals.rules import resolve
from bot.clock import as_utc, utcnow
from bot.config import load_settings
from bot.engine.tools import ApprovalPolicy, CallFacts
from bot.errors import UserError
from connectors.loading import load_manifest_file
from connectors.manifest import HttpConnector, ManifestError


def static_policy(path: Path, action: str) -> ApprovalPolicy:
    """The action's policy (with its rules and the connector's) as the bot builds it."""
    try:
        manifest = load_manifest_file(path)
    except ManifestError as exc:
        raise UserError(str(exc).splitlines()[0]) from None
    if isinstance(manifest, HttpConnector):
        for entry in manifest.actions:
            if entry.name == action:
                return entry.policy(mutating=entry.is_mutating, connector_rules=manifest.rules)
        names = ", ".join(a.name for a in manifest.actions)
        raise UserError(f"{path}: no action {action!r} (actions: {names})")
    rule, _ = manifest.matching_rule(action)  # an MCP tool by name; mutating unless trusted
    return rule.policy(mutating=True, connector_rules=manifest.rules)


def _arguments(text: str) -> dict:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"--args is not JSON: {exc.msg} (column {exc.colno})") from None
    if not isinstance(value, dict):
        raise UserError('--args must be a JSON object, e.g. \'{"env": "production"}\'')
    return value


def _when(text: str | None) -> datetime:
    if not text:
        return utcnow()
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise UserError(f"--at {text!r} is not an ISO 8601 time (2026-12-05T09:30:00Z)") from None
    if moment.tzinfo is None:
        raise UserError(f"--at {text!r} needs a zone (Z or +01:00)")
    return as_utc(moment)


def explain_command(args: argparse.Namespace, out: TextIO) -> int:
    settings = load_settings()
    base = static_policy(Path(args.file), args.action)
    facts = CallFacts(
        args=_arguments(args.args),
        requesters=tuple(args.user),
        channel=args.channel,
        platform=args.platform,
        now=_when(args.at),
        zone=settings.chatops_timezone,
    )
    resolution = resolve(base, facts)
    policy = resolution.policy
    groups = settings.chatops_approver_groups
    sources = {rule.label: rule.source for rule in base.rules}
    if resolution.error:
        print(f"rule: {policy.rule} could not be evaluated", file=out)
    elif policy.rule:
        print(f"rule: {policy.rule} (when: {sources.get(policy.rule, '').strip()})", file=out)
    else:
        print(f"rule: none matched ({len(base.rules)} rule(s)): the static policy", file=out)
    for line in describe_policy(policy, groups, settings.chatops_approval_timeout_s):
        print(line, file=out)
    return 0


def describe_policy(
    policy: ApprovalPolicy, groups: dict[str, list[str]], default_timeout_s: float
) -> list[str]:
    """The resolved policy, one setting a line."""
    if policy.denied:
        return ["approval: deny (blocked, nobody is asked)", f"reason: {policy.reason}"]
    if not policy.requires_approval:
        why = " (auto: read-only)" if policy.approval == "auto" else ""
        return [f"approval: never{why} (runs without asking)", f"risk: {policy.risk}"]
    lines = ["approval: required" + (" (auto: mutating)" if policy.approval == "auto" else "")]
    lines.append(f"approvers: {_people(policy.approvers, groups) or 'anyone in the thread'}")
    lines.append(f"min_approvals: {policy.min_approvals}")
    lines.append(f"allow_self_approval: {str(policy.allow_self_approval).lower()}")
    lines.append(f"risk: {policy.risk}")
    timeout = policy.timeout_s or default_timeout_s
    lines.append(f"timeout_s: {timeout:g}, then {policy.on_timeout}")
    lines.append(f"route: {policy.route}")
    for tier in policy.escalate:
        notify = f" ({tier.notify})" if tier.notify else ""
        who = _people(tier.approvers, groups)
        lines.append(f"escalate: after {tier.after_s:g} s add {who}{notify}")
    if policy.reason:
        lines.append(f"reason: {policy.reason}")
    return lines


def _people(names: tuple[str, ...], groups: dict[str, list[str]]) -> str:
    shown = []
    for name in names:
        members = groups.get(name)
        shown.append(f"{name} ({', '.join(members)})" if members is not None else name)
    return ", ".join(shown)
