"""`chatops manifests explain FILE ACTION --args '{...}'`: which rule a call would match, and the
policy that results, so a reviewer can test a policy without running anything.

The call is resolved exactly as the approval gate resolves it (`bot.approvals.rules.resolve`)
with the requesters, channel, platform and time given on the command line. With `--granter U`
it also says whether U's "approve for this thread" on an earlier call (`--grant-args`,
`--grant-user`, `--grant-at`; each defaults to the call's own), for `--grantee`s (default: that
call's requesters), would cover this call, and why, as the gate judges it
(`bot.approvals.grants.judge`).
"""

from __future__ import annotations

import argparse
import json
from datetime import datetime
from pathlib import Path
from typing import TextIO

from bot.approvals.grants import GrantTerms, judge, rule_name
from bot.approvals.rules import resolve
from bot.approvals.schema import ApprovalPolicy, CallFacts
from bot.clock import as_utc, utcnow
from bot.config import load_settings
from bot.errors import UserError
from connectors.loading import load_manifest_file
from connectors.manifest import HttpConnector, ManifestError
from connectors.sql.manifest import SqlConnector


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
    if isinstance(manifest, SqlConnector):
        return _sql_policy(manifest, path, action)
    rule, _ = manifest.matching_rule(action)  # an MCP tool by name; mutating unless trusted
    return rule.policy(mutating=True, connector_rules=manifest.rules)


def _sql_policy(manifest: SqlConnector, path: Path, action: str) -> ApprovalPolicy:
    for entry in manifest.actions:
        if entry.name == action:
            mutating = entry.is_mutating(manifest.dialect)
            return entry.policy(mutating=mutating, connector_rules=manifest.rules)
    if manifest.query is not None and manifest.query.name == action:
        return manifest.query.policy(mutating=False, connector_rules=manifest.rules)
    raise UserError(f"{path}: no action {action!r} (actions: {', '.join(manifest.action_names())})")


def _arguments(text: str) -> dict:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"--args is not JSON: {exc.msg} (column {exc.colno})") from None
    if not isinstance(value, dict):
        raise UserError('--args must be a JSON object, e.g. \'{"env": "production"}\'')
    return value


def _when(text: str | None, flag: str = "--at") -> datetime:
    if not text:
        return utcnow()
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise UserError(f"{flag} {text!r} is not an ISO 8601 time (2026-12-05T09:30:00Z)") from None
    if moment.tzinfo is None:
        raise UserError(f"{flag} {text!r} needs a zone (Z or +01:00)")
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
    if args.granter:
        granted = CallFacts(
            args=_arguments(args.grant_args) if args.grant_args else facts.args,
            requesters=tuple(args.grant_user) or facts.requesters,
            channel=facts.channel,
            platform=facts.platform,
            now=_when(args.grant_at, "--grant-at") if args.grant_at else facts.now,
            zone=facts.zone,
        )
        grantees = tuple(args.grantee) or granted.requesters
        for line in explain_grant(base, granted, facts, (args.granter, grantees), groups):
            print(line, file=out)
    return 0


def explain_grant(
    base: ApprovalPolicy,
    granted: CallFacts,
    call: CallFacts,
    grant: tuple[str, tuple[str, ...]],
    groups: dict[str, list[str]],
) -> list[str]:
    """Would `grant` (granter, grantees), an "approve for this thread" on the `granted` call,
    cover `call`? Two lines: the grant as it would be recorded, then the gate's verdict and
    its reason. Who may approve is judged with today's configuration, as the gate does."""
    granter, grantees = grant
    then = resolve(base, granted).policy
    under = rule_name(then.rule)
    if then.denied or not then.requires_approval:
        return [f"grant made: none (the granted call has no approval card: {under})"]
    if not then.grants_allowed:
        return [f"grant made: none ({under} needs more than one approver or four-eyes)"]
    made = f"grant made: by {granter} under {under}, for {', '.join(grantees) or 'nobody'}"
    terms = GrantTerms(
        granted_by=granter,
        policy_rule=then.rule,
        fingerprint=then.grant_fingerprint("call", granted.args),
        grantees=grantees,
    )
    now = resolve(base, call).policy
    if now.denied or not now.requires_approval:
        return [made, "grant covers this call: not needed (no approval card is asked for)"]
    fingerprint = now.grant_fingerprint("call", call.args) if now.grants_allowed else ""
    cover = judge(terms, now, fingerprint=fingerprint, requesters=call.requesters, groups=groups)
    return [made, f"grant covers this call: {'yes' if cover.covered else 'no'}: {cover.why}"]


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
