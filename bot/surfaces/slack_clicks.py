"""Slack approval clicks: the card's buttons and the two dialogs they open, as stored decisions.

The clicker is always the verified payload's `user.id`, never anything the card carried. An
approval is stored in the inbox before bolt acknowledges the click (what is acknowledged is
kept); the broker applies it from there. Reject and "approve for this thread" first ask the
broker whether this person may answer that way, and only then open their dialog (a reason; who
the grant covers): anyone else is told at once, in a note only they see. The dialog's
submission is stored like a click. Every decision names its platform, so a click here decides
only cards posted on Slack.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from bot.inbox import DecisionRecord, Inbox
from bot.surfaces.base import ThreadRef
from bot.surfaces.slack_cards import (
    APPROVE_THREAD_ACTION,
    GRANTEES_BLOCK,
    GRANTEES_INPUT,
    REASON_BLOCK,
    REASON_INPUT,
    REJECT_ACTION,
    render_grant_modal,
    render_reject_modal,
)
from bot.surfaces.slack_outbound import SlackSurface

if TYPE_CHECKING:
    from bot.approvals import ApprovalBroker, Decision

PLATFORM = "slack"
Spawn = Callable[[Coroutine[Any, Any, None], str], None]


class SlackClicks:
    """Turns approval clicks and dialog submissions into inbox decisions (see the docstring)."""

    def __init__(
        self, broker: ApprovalBroker, surface: SlackSurface, inbox: Inbox, spawn: Spawn
    ) -> None:
        self.broker = broker
        self.surface = surface
        self.inbox = inbox
        self.spawn = spawn

    async def accept_click(self, body: dict[str, Any], action: dict[str, Any]) -> None:
        """A button on an approval card: an approval is stored before the ack; Reject and
        "approve for this thread" open their dialog first (on a task: the ack does not wait)."""
        approval_id = str(action.get("value", ""))
        user_id = body["user"]["id"]
        origin = click_origin(body)
        action_id = action.get("action_id")
        if action_id in (REJECT_ACTION, APPROVE_THREAD_ACTION):
            grant = action_id == APPROVE_THREAD_ACTION
            self.spawn(
                self._open_dialog(approval_id, user_id, body, origin, grant=grant),
                f"{action_id} dialog {approval_id}",
            )
            return
        await self._store(approval_id, user_id, "approve", origin)

    async def _open_dialog(
        self,
        approval_id: str,
        user_id: str,
        body: dict[str, Any],
        origin: dict[str, str],
        *,
        grant: bool,
    ) -> None:
        """Open the reject dialog (a reason) or the grant dialog (who it covers) only for
        someone who may decide that way; tell anyone else at once."""
        decision: Decision = "approve_thread" if grant else "reject"
        refused = await self.broker.refusal(approval_id, user_id, decision, platform=PLATFORM)
        if refused is not None:
            await self._tell(origin, user_id, refused.message)
            return
        if grant:
            card = await self.broker.view(approval_id)
            if card is None:
                return
            view = render_grant_modal(approval_id, origin, card)
        else:
            view = render_reject_modal(approval_id, origin, _card_title(body))
        await self.surface.client.views_open(trigger_id=body["trigger_id"], view=view)

    async def accept_reject_submission(self, body: dict[str, Any]) -> None:
        """The reject dialog was submitted (an empty reason is allowed): stored before the ack."""
        approval_id, origin, values = _submitted(body)
        reason = (values.get(REASON_BLOCK, {}).get(REASON_INPUT, {}).get("value") or "").strip()
        await self._store(approval_id, body["user"]["id"], "reject", origin, reason=reason)

    async def accept_grant_submission(self, body: dict[str, Any]) -> None:
        """The grant dialog was submitted: approve for the thread, for the users picked."""
        approval_id, origin, values = _submitted(body)
        picked = values.get(GRANTEES_BLOCK, {}).get(GRANTEES_INPUT, {}).get("selected_users")
        grantees = tuple(str(u) for u in picked or () if u)
        await self._store(
            approval_id, body["user"]["id"], "approve_thread", origin, grantees=grantees
        )

    async def _store(
        self,
        approval_id: str,
        user_id: str,
        decision: Decision,
        origin: dict[str, str],
        *,
        reason: str = "",
        grantees: tuple[str, ...] = (),
    ) -> None:
        record = DecisionRecord(
            platform=PLATFORM,
            approval_id=approval_id,
            user_id=user_id,
            decision=decision,
            reason=reason,
            grantees=grantees,
            reply_to=origin_thread(origin),
        )
        await self.inbox.accept_decision(record)

    async def _tell(self, origin: dict[str, str], user_id: str, message: str) -> None:
        """A private note to the clicker in the card's thread."""
        thread = origin_thread(origin)
        if thread is not None:
            await self.surface.notify_user(thread, user_id, message)


def _submitted(body: dict[str, Any]) -> tuple[str, dict[str, str], dict[str, Any]]:
    """A dialog's approval id, the card's origin (its private metadata) and its values."""
    view = body["view"]
    origin = json.loads(view.get("private_metadata") or "{}")
    approval_id = str(origin.pop("approval_id", ""))
    return approval_id, origin, view.get("state", {}).get("values", {})


def origin_thread(origin: dict[str, str]) -> ThreadRef | None:
    if not origin.get("channel"):
        return None
    return ThreadRef(
        PLATFORM, origin.get("team", ""), origin["channel"], origin.get("thread_ts", "")
    )


def click_origin(body: dict[str, Any]) -> dict[str, str]:
    """Where a clicked card lives (team, channel, thread), for ephemeral replies."""
    container = body.get("container") or {}
    message = body.get("message") or {}
    return {
        "team": (body.get("team") or {}).get("id") or body["user"].get("team_id", ""),
        "channel": (body.get("channel") or {}).get("id") or container.get("channel_id", ""),
        "thread_ts": message.get("thread_ts")
        or container.get("thread_ts")
        or message.get("ts", ""),
    }


def _card_title(body: dict[str, Any]) -> str:
    for block in (body.get("message") or {}).get("blocks", []):
        if block.get("type") == "header":
            return str(block["text"]["text"])
    return "this tool call"
