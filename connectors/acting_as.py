"""Whose credentials a call of a per-user OAuth connector uses, said once for the approval-time
hook (`hooks.credentials`) and the call itself (`connectors.http`).

A tool of such a connector carries `ActingAs` in its metadata; `acting_person` picks the person
from who asked and who approved, and `CredentialNote` tells the call log whose credentials were
used (an owner id or `bot`, never a token).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from connectors.manifest import HttpAction, HttpConnector
from connectors.manifest_auth import Fallback, OAuth2Auth, OnBehalfOf
from connectors.oauth_vault import Person

ACTING_AS = "acting_as"  # the tool metadata key
BOT = "bot"  # the credential owner of a call made with the bot's own token


@dataclass(frozen=True)
class ActingAs:
    """One action's rule: `on_behalf_of` requester, approver or bot; `fallback` bot or none."""

    connector: str
    on_behalf_of: OnBehalfOf
    fallback: Fallback


@dataclass(frozen=True)
class CredentialNote:
    """PreToolUse note: the call goes out with this owner's credentials (`Person.owner`, or
    `bot`); the call log records it."""

    owner: str


def acting_as(manifest: HttpConnector, action: HttpAction) -> ActingAs | None:
    """The action's rule, its manifest's defaults filled in (None: not a per-user connector)."""
    if not isinstance(manifest.auth, OAuth2Auth):
        return None
    return ActingAs(
        manifest.name,
        action.on_behalf_of or manifest.auth.on_behalf_of,
        action.fallback or manifest.auth.fallback,
    )


def acting_as_of(metadata: Mapping[str, object]) -> ActingAs | None:
    rule = metadata.get(ACTING_AS)
    return rule if isinstance(rule, ActingAs) else None


def acting_person(
    rule: ActingAs,
    *,
    platform: str,
    workspace: str,
    requester: str,
    approvers: Sequence[str],
) -> Person | None:
    """The person a call acts as: the requester, or the approver who decided (the last of a
    quorum); None for `bot`, or for `approver` when no one approved the call."""
    if rule.on_behalf_of == "bot":
        return None
    who = requester if rule.on_behalf_of == "requester" else (approvers[-1] if approvers else "")
    return Person(platform, workspace, who) if who else None
