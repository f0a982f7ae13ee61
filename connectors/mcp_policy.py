"""The approval policy of one MCP tool: the manifest's rules weighed against the server's hints."""

from __future__ import annotations

from dataclasses import replace

import mcp_types

from bot.approvals.schema import ApprovalPolicy
from connectors.manifest import McpConnector


def resolve_policy(manifest: McpConnector, listed: mcp_types.Tool) -> ApprovalPolicy:
    """The one approval policy of one of the server's tools (the gate, the read-only guard and
    the call log all read it), saying what decided it.

    The manifest decides; the server's annotations are hints from someone else. Every tool
    counts as changing things (mutating) unless the connector has `trust_annotations: true` and
    the server marks the tool `readOnlyHint: true`. `destructiveHint: true` raises the bar:
    mutating, risk high and approval required, except where the matching rule sets `risk` or
    `approval` itself (the manifest's explicit settings always win).
    """
    rule, index = manifest.matching_rule(listed.name)
    explicit = rule.model_fields_set if index is not None else set()
    hints = listed.annotations
    read_only = bool(hints and hints.read_only_hint is True)
    destructive = bool(hints and hints.destructive_hint is True)
    mutating = destructive or not (read_only and manifest.trust_annotations)
    approval, risk = rule.approval, rule.risk
    if destructive:
        approval = rule.approval if "approval" in explicit else "required"
        risk = rule.risk if "risk" in explicit else "high"
    settings = f"approval {rule.approval}, risk {rule.risk}"
    why = f"no manifest rule matches: defaults {settings}"
    if index is not None:
        why = f"manifest rule {rule.match!r} (tools[{index}]) sets {settings}"
    if destructive:
        why += f"; the server marks it destructive (destructiveHint): approval {approval}, "
        why += f"risk {risk}"
    elif read_only and manifest.trust_annotations:
        why += "; the server marks it read-only (readOnlyHint) and trust_annotations is on"
    elif read_only:
        why += "; the server says read-only, but trust_annotations is off: it counts as mutating"
    else:
        why += "; the server does not mark it read-only, so it counts as mutating"
    policy = rule.policy(mutating=mutating, risk=risk, connector_rules=manifest.rules)
    return replace(policy, approval=approval, decided_by=why)
