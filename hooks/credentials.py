"""PreToolUse: a call that acts as a person waits until that person has connected their account.

After the approval gate (so an `on_behalf_of: approver` call knows who approved it) and before
the call log's write-ahead row. A per-user OAuth call (`connectors.acting_as`) whose person has
not connected: their one-time connect link goes to them alone (`CredentialWaiting`: an ephemeral
message on Slack, a private note on Feishu and the console), the run's status says who it waits
for, and the call waits, bounded (`CHATOPS_OAUTH_WAIT_S`, time a human's, not the run's). Linked
in time: the call goes on with their credentials. Not: the call does not run and the model is
told why. With `fallback: bot` a person who has not connected is not asked: the call goes
with the bot's token. The note it leaves (`CredentialNote`)
tells the call log whose credentials were used.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from bot.chat.events import CredentialEnded, CredentialWaiting
from bot.engine.events import emit_safely
from bot.engine.hooks import HookResult, PreToolUseContext
from bot.engine.notes import ApprovalNote
from bot.runs.deps import run_deps
from connectors.acting_as import BOT, CredentialNote, acting_as_of, acting_person
from connectors.oauth_service import OAuthService
from connectors.oauth_vault import Person

log = logging.getLogger(__name__)


class CredentialLinkHook:
    """Ask the person to connect, and wait for them (see the module docstring)."""

    name = "credentials"

    def __init__(self, oauth: Callable[[], OAuthService | None], *, wait_s: float) -> None:
        """`oauth`: the runtime's service (None: no per-user connector); `wait_s`: how long a
        call waits for a person to connect."""
        self._oauth = oauth
        self._wait_s = wait_s

    async def __call__(self, ctx: PreToolUseContext[Any]) -> HookResult:
        rule = acting_as_of(ctx.tool.metadata)
        if rule is None:
            return HookResult.allow()
        if rule.on_behalf_of == "bot":
            return HookResult.allow(note=CredentialNote(BOT))
        approval = ctx.notes.get(ApprovalNote)
        person = acting_person(
            rule, platform=ctx.run.platform, workspace=ctx.run.workspace,
            requester=ctx.run.requester or next(iter(ctx.requesters), ""),
            approvers=approval.approvers if approval is not None else (),
        )  # fmt: skip
        oauth = self._oauth()
        if person is None:
            if rule.fallback == "bot":
                return HookResult.allow(note=CredentialNote(BOT))
            return HookResult.block(
                f"Not run: `{ctx.tool.name}` acts as the person who approves it, and no one "
                "approved this call."
            )
        if oauth is None:
            return self._without_link(ctx, person, rule.fallback)
        if await oauth.linked(rule.connector, person):
            return HookResult.allow(note=CredentialNote(person.owner))
        if rule.fallback == "bot":  # the owner's choice: not connected, the bot's token
            return HookResult.allow(note=CredentialNote(BOT))
        deps = run_deps(ctx.run)
        if deps is None:  # no thread to send the link to (the terminal)
            return self._without_link(ctx, person, rule.fallback)
        link = await oauth.create_link(rule.connector, person)
        waiting = CredentialWaiting(
            ctx.tool_call_id, ctx.tool.name, person.user_id, rule.connector, link
        )
        await emit_safely(deps.emit, waiting)
        with ctx.waiting_for_human():
            linked = await oauth.wait_linked(rule.connector, person, self._wait_s)
        ended = CredentialEnded(ctx.tool_call_id, ctx.tool.name, rule.connector, linked)
        await emit_safely(deps.emit, ended)
        if linked:
            return HookResult.allow(note=CredentialNote(person.owner))
        minutes = f"{self._wait_s / 60:g} minute" + ("" if self._wait_s == 60 else "s")
        return HookResult.block(
            f"Not run: `{ctx.tool.name}` acts with {person.user_id}'s own {rule.connector} "
            f"account, and {person.user_id} did not connect it within {minutes} (a link was "
            "sent to them). Tell the user they can ask again once connected."
        )

    @staticmethod
    def _without_link(ctx: PreToolUseContext[Any], person: Person, fallback: str) -> HookResult:
        if fallback == "bot":
            return HookResult.allow(note=CredentialNote(BOT))
        return HookResult.block(
            f"Not run: `{ctx.tool.name}` acts with {person.user_id}'s own account, which is not "
            "connected, and no connect link can be sent from here (connect through the bot "
            "in chat first)."
        )
