"""Does a thread grant cover a call? The one answer, for the gate and `manifests explain`.

A grant ("approve for this thread") records the rule that decided the approved call's policy and
the approvers that rule named. A later call is covered only when, evaluated now, its policy
still allows grants (no quorum, no four-eyes), resolves to the same rule, lets the granter
approve (in the call's workspace, whose approvers and groups `CHATOPS_WORKSPACES_FILE` may
set), has the same scope fingerprint (arguments but `grant_scope.vary`), and every requester
is a grantee. A grant that records no rule (written before grants were bound to their rule)
covers nothing: nobody can say which rule it was made under.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from bot.approvals.authority import resolve_approvers
from bot.approvals.schema import ApprovalPolicy
from bot.storage.models import ApprovalGrant

G = TypeVar("G")


@dataclass(frozen=True, kw_only=True)
class GrantTerms:
    """What a grant recorded when it was made; `policy_rule` None: recorded no rule."""

    granted_by: str
    policy_rule: str | None
    fingerprint: str
    grantees: tuple[str, ...]


def terms_of(row: ApprovalGrant) -> GrantTerms:
    """What a stored grant recorded."""
    return GrantTerms(
        granted_by=row.granted_by,
        policy_rule=row.policy_rule,
        fingerprint=row.fingerprint,
        grantees=tuple(row.grantees),
    )


@dataclass(frozen=True)
class Cover:
    """Whether a grant covers a call, and why (one sentence a reviewer can act on)."""

    covered: bool
    why: str


def rule_name(rule: str | None) -> str:
    """How a rule is named to people ('' is the action's static policy)."""
    if rule is None:
        return "no recorded rule"
    return f"rule {rule!r}" if rule else "the static policy (no rule matched)"


def judge(
    terms: GrantTerms,
    policy: ApprovalPolicy,
    *,
    fingerprint: str,
    requesters: Sequence[str],
    groups: Mapping[str, list[str]],
    within: Sequence[str] | None = None,
) -> Cover:
    """Does the grant `terms` cover a call whose policy, resolved now, is `policy` and whose
    scope fingerprint is `fingerprint`? Every condition is checked; the first that fails says
    why not. `groups`, `within`: the approver groups and approvers of the call's workspace
    (`CHATOPS_WORKSPACES_FILE`; `within` None: no list), as a click is judged there."""
    if not policy.grants_allowed or not fingerprint:
        return Cover(False, "grants never apply here: the call needs more than one approver or "
                            "someone other than the requester")  # fmt: skip
    if terms.policy_rule is None:
        return Cover(False, "the grant records no rule (it predates grants bound to their rule), "
                            "so it covers nothing")  # fmt: skip
    if terms.fingerprint != fingerprint:
        return Cover(False, "the arguments differ from the granted call beyond grant_scope.vary")
    if terms.policy_rule != policy.rule:
        return Cover(
            False,
            f"the call now resolves to {rule_name(policy.rule)}, the grant was made under "
            f"{rule_name(terms.policy_rule)}",
        )
    if policy.approvers and terms.granted_by not in resolve_approvers(groups, policy.approvers):
        return Cover(
            False,
            f"{terms.granted_by} granted it but is not (or no longer) one of the approvers of "
            f"{rule_name(policy.rule)} ({', '.join(policy.approvers)})",
        )
    if within is not None and terms.granted_by not in resolve_approvers(groups, within):
        return Cover(
            False,
            f"{terms.granted_by} granted it but is not (or no longer) one of this workspace's "
            "approvers",
        )
    missing = [person for person in requesters if person not in terms.grantees]
    if not requesters or missing:
        who = ", ".join(missing) or "nobody known asked"
        return Cover(False, f"not every requester is a grantee ({who})")
    return Cover(
        True,
        f"granted by {terms.granted_by} under {rule_name(policy.rule)}, which the call still "
        "resolves to, and the granter is still one of its approvers",
    )


def first_covering(
    grants: Iterable[tuple[G, GrantTerms]],
    policy: ApprovalPolicy,
    *,
    fingerprint: str,
    requesters: Sequence[str],
    groups: Mapping[str, list[str]],
    within: Sequence[str] | None = None,
) -> G | None:
    """The first grant (newest first, as given) that covers the call, or None."""
    for grant, terms in grants:
        cover = judge(terms, policy, fingerprint=fingerprint, requesters=requesters,
                      groups=groups, within=within)  # fmt: skip
        if cover.covered:
            return grant
    return None
