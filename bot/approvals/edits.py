"""Edit, then approve: whether this approver may approve the call as they edited it, what the
edit changed, and the edited call with the secrets the card hid put back.

The policy is resolved again on the edited arguments (the manifest rules see them as they would
see the model's): an edit a rule denies, or one whose policy needs people this approver cannot
stand for (other approvers, more of them, or someone other than a requester), is refused; the
approver may still reject it or request changes. The model is told the edit as a short diff, so
it does not "correct" the call back.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from bot.approvals import authority
from bot.approvals.cards import requesters_of
from bot.approvals.diff import describe_edit as describe_edit
from bot.approvals.rules import resolve
from bot.approvals.schema import CallFacts, policy_of
from bot.engine.tools import Tool
from bot.redaction import REDACTED
from bot.storage.models import Approval


def policy_refusal(
    row: Approval,
    tool: Tool,
    arguments: Mapping[str, Any],
    user_id: str,
    *,
    facts: CallFacts,
    groups: Mapping[str, list[str]],
    within: Sequence[str] | None = None,
) -> str:
    """Why `user_id` may not approve the call with `arguments` under the policy those arguments
    resolve to ("" when they may). `facts` are the call's (who, where, when) with any args;
    `groups`, `within`: the approver groups and approvers of the approval's workspace."""
    if within is not None and user_id not in authority.resolve_approvers(groups, within):
        return "You are not one of this workspace's approvers, so you cannot approve an edit here."
    policy = resolve(policy_of(tool), CallFacts(
        args=arguments, requesters=facts.requesters, channel=facts.channel,
        platform=facts.platform, now=facts.now, zone=facts.zone,
    )).policy  # fmt: skip
    rule = f"the rule {policy.rule!r}" if policy.rule else "the action's policy"
    if policy.denied:
        why = f": {policy.reason}" if policy.reason else ""
        return f"This edit is denied by {rule}{why}. Reject the call or request changes instead."
    if not policy.requires_approval:
        return ""
    same_rule = policy.rule == row.policy_rule
    eligible = (
        not policy.approvers
        or user_id in authority.resolve_approvers(groups, policy.approvers)
        or (same_rule and authority.may_decide(groups, user_id, row))
    )
    if not eligible:
        who = ", ".join(policy.approvers)
        return (
            f"This edit falls under {rule}, whose approvers are {who}: you cannot approve it. "
            "Reject the call or request changes instead."
        )
    if policy.min_approvals > row.min_approvals:
        return (
            f"This edit falls under {rule}, which needs {policy.min_approvals} approvals (this "
            f"request asks for {row.min_approvals}): it cannot be approved here. Reject the "
            "call or request changes instead."
        )
    if not policy.allow_self_approval and user_id in requesters_of(row):
        return (
            f"This edit falls under {rule}, under which someone other than a requester must "
            "approve (four-eyes rule)."
        )
    return ""


def unmask(edited: Any, shown: Any, real: Any) -> Any:
    """The edited call with the secrets the card hid put back: where the edit left a value as
    the card showed it (`shown`: the masked model arguments), the model's `real` value runs."""
    if edited == shown:
        return real
    if isinstance(edited, Mapping) and isinstance(shown, Mapping) and isinstance(real, Mapping):
        return {
            key: unmask(value, shown[key], real[key]) if key in shown and key in real else value
            for key, value in edited.items()
        }
    if (
        isinstance(edited, list) and isinstance(shown, list) and isinstance(real, list)
        and len(edited) == len(shown) == len(real)
    ):  # fmt: skip
        return [unmask(e, s, r) for e, s, r in zip(edited, shown, real, strict=True)]
    return edited


def masked_edits(edited: Mapping[str, Any], shown: Mapping[str, Any]) -> list[str]:
    """The arguments an edit changed while keeping a hidden secret's mark in the changed value:
    a secret the card hid cannot be edited in part (what would run is the mark itself)."""
    return [key for key, value in edited.items() if _mark_changed(value, shown.get(key, None))]


def _mark_changed(edited: Any, shown: Any) -> bool:
    if edited == shown:
        return False
    if isinstance(edited, Mapping) and isinstance(shown, Mapping):
        return any(_mark_changed(v, shown.get(k)) for k, v in edited.items())
    if isinstance(edited, list) and isinstance(shown, list) and len(edited) == len(shown):
        return any(_mark_changed(e, s) for e, s in zip(edited, shown, strict=True))
    return REDACTED in json.dumps(edited, default=str)
