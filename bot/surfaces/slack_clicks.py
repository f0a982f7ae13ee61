"""Slack approval clicks: the card's buttons and the two dialogs they open, as broker decisions.

The clicker is always the verified payload's `user.id`, never anything the card carried. Reject
and "approve for this thread" first ask the broker whether this person may answer that way, and
only then open their dialog (a reason; who the grant covers); anyone else is told at once, in a
note only they see. Every decision names its platform, so only cards posted on Slack are decided
from here.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

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
    """Turns approval clicks and dialog submissions into broker decisions, on `spawn`ed tasks."""

    def __init__(self, broker: ApprovalBroker, surface: SlackSurface, spawn: Spawn) -> None:
        self.broker = broker
        self.surface = surface
        self.spawn = spawn

    def on_click(self, body: dict[str, Any], action: dict[str, Any]) -> None:
        """A button on an approval card; the clicker is `body.user.id` from the verified payload."""
        approval_id = str(action.get("value", ""))
        user_id = body["user"]["id"]
        origin = click_origin(body)
        action_id = action.get("action_id")
        if action_id in (REJECT_ACTION, APPROVE_THREAD_ACTION):
            self.spawn(
                self._open_dialog(
                    approval_id, user_id, body, origin, grant=action_id != REJECT_ACTION
                ),
                f"{action_id} dialog {approval_id}",
            )
            return
        self.spawn(
            self._decide(approval_id, user_id, "approve", "", origin), f"approve {approval_id}"
        )

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
        broker = self.broker
        refused = await broker.refusal(approval_id, user_id, decision, platform=PLATFORM)
        if refused is not None:
            await self._tell(origin, user_id, refused.message)
            return
        if grant:
            card = await broker.view(approval_id)
            if card is None:
                return
            view = render_grant_modal(approval_id, origin, card)
        else:
            view = render_reject_modal(approval_id, origin, _card_title(body))
        await self.surface.client.views_open(trigger_id=body["trigger_id"], view=view)

    def on_reject_submitted(self, body: dict[str, Any]) -> None:
        """The reject modal was submitted; an empty reason is allowed."""
        view = body["view"]
        origin = json.loads(view.get("private_metadata") or "{}")
        approval_id = str(origin.pop("approval_id", ""))
        values = view.get("state", {}).get("values", {})
        reason = (values.get(REASON_BLOCK, {}).get(REASON_INPUT, {}).get("value") or "").strip()
        self.spawn(
            self._decide(approval_id, body["user"]["id"], "reject", reason, origin),
            f"reject {approval_id}",
        )

    def on_grant_submitted(self, body: dict[str, Any]) -> None:
        """The grant modal was submitted: approve for the thread, for the users picked."""
        view = body["view"]
        origin = json.loads(view.get("private_metadata") or "{}")
        approval_id = str(origin.pop("approval_id", ""))
        values = view.get("state", {}).get("values", {})
        picked = values.get(GRANTEES_BLOCK, {}).get(GRANTEES_INPUT, {}).get("selected_users")
        grantees = [str(u) for u in picked or () if u]
        self.spawn(
            self._decide(
                approval_id, body["user"]["id"], "approve_thread", "", origin, grantees=grantees
            ),
            f"approve_thread {approval_id}",
        )

    async def _decide(
        self,
        approval_id: str,
        user_id: str,
        decision: Decision,
        reason: str,
        origin: dict[str, str],
        *,
        grantees: list[str] | None = None,
    ) -> None:
        result = await self.broker.decide(
            approval_id, user_id, decision, reason, platform=PLATFORM, grantees=grantees
        )
        if result.status != "decided":  # when decided, the broker updates the card itself
            await self._tell(origin, user_id, result.message)

    async def _tell(self, origin: dict[str, str], user_id: str, message: str) -> None:
        """A private note to the clicker in the card's thread."""
        if not origin.get("channel"):
            return
        thread = ThreadRef(
            "slack", origin.get("team", ""), origin["channel"], origin.get("thread_ts", "")
        )
        await self.surface.notify_user(thread, user_id, message)


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
