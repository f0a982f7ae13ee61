"""Slack approval clicks: the card's buttons and the dialogs they open, as stored decisions.

The clicker is always the verified payload's `user.id`, never anything the card carried. An
approval is stored in the inbox before bolt acknowledges the click (what is acknowledged is
kept); the broker applies it from there. Reject, "approve with comment", request changes,
"edit, then approve" and "approve for this thread" first ask the broker whether this person may
answer that way, and only then open their dialog (a reason; a comment; guidance for the agent;
the call's arguments; who the grant covers): anyone else is told at once, in a note only they
see. A dialog's submission is stored like a click; an edit is checked first (the broker parses
it against the tool's schema and policy) and a bad one is answered with `response_action:
errors`, inside the modal, with nothing stored. Every decision names its platform, so a click
here decides only cards posted on Slack, and carries the card it was made on (`container`:
channel and message) and whether the clicker is a member of another organisation (Slack
Connect): the broker refuses a click that is not on the approval's own card, and an external
clicker the manifest does not name. A batch card's Approve all / Reject all are stored like
Approve (the broker decides every call of the batch, or none). A payload missing what a click
must carry is ignored.
The same buttons in a person's App Home (`home.py`: a `block_actions` whose container is the
view) decide the same way, judged by the broker as clicks made in that person's own inbox;
what they are told then goes to their direct messages with the bot.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from bot.chat.decisions import CardClick, Decision, DecisionRecord
from bot.chat.forms import EditForm
from bot.chat.ports import Decisions, InboxPort
from bot.chat.threads import ThreadRef
from bot.surfaces.slack.batch_card import APPROVE_ALL_ACTION, REJECT_ALL_ACTION
from bot.surfaces.slack.cards import (
    APPROVE_COMMENT_ACTION,
    APPROVE_THREAD_ACTION,
    CHANGES_ACTION,
    EDIT_ACTION,
    GRANTEES_BLOCK,
    GRANTEES_INPUT,
    REASON_BLOCK,
    REASON_INPUT,
    REJECT_ACTION,
    render_approve_modal,
    render_changes_modal,
    render_details_modal,
    render_grant_modal,
    render_reject_modal,
)
from bot.surfaces.slack.edit_modal import errors_reply, render_edit_modal, submitted_values
from bot.surfaces.slack.identity import (
    SlackIdentity,
    SlackInstallation,
    is_external,
    request_team,
)
from bot.surfaces.slack.outbound import SlackSurface

log = logging.getLogger(__name__)

PLATFORM = "slack"
INBOX_ORIGIN = "inbox"  # an origin's mark: the click was made in the clicker's App Home
Spawn = Callable[[Coroutine[Any, Any, None], str], None]


class SlackClicks:
    """Turns approval clicks and dialog submissions into inbox decisions (see the docstring)."""

    def __init__(
        self,
        decisions: Decisions,
        surface: SlackSurface,
        inbox: InboxPort,
        spawn: Spawn,
        installation: SlackInstallation,
    ) -> None:
        self.decisions = decisions
        self.surface = surface
        self.inbox = inbox
        self.spawn = spawn
        self.installation = installation

    async def accept_click(self, body: dict[str, Any], action: dict[str, Any]) -> None:
        """A button on an approval card: an approval is stored before the ack; Reject and
        "approve for this thread" open their dialog first (on a task: the ack does not wait)."""
        me = await self.installation.identity(request_team(body))
        click = parse_click(body, action, me)
        if click is None:
            log.warning("slack: a malformed approval click was ignored")
            return
        approval_id, user_id, card = click
        origin = {**click_origin(body), "card_ts": card.message_id}
        if card.inbox:  # the clicker's App Home: no card message, no thread to reply in
            origin = {"team": origin["team"], "channel": "", "thread_ts": "", "card_ts": "",
                      INBOX_ORIGIN: "1"}  # fmt: skip
        action_id = action.get("action_id")
        dialogs: dict[object, Decision] = {
            REJECT_ACTION: "reject", APPROVE_THREAD_ACTION: "approve_thread",
            APPROVE_COMMENT_ACTION: "approve", EDIT_ACTION: "approve_edited",
            CHANGES_ACTION: "request_changes",
        }  # fmt: skip
        if action_id in dialogs:
            self.spawn(
                self._open_dialog(approval_id, user_id, body, origin, card, dialogs[action_id]),
                f"{action_id} dialog {approval_id}",
            )
            return
        batch: dict[object, Decision] = {
            APPROVE_ALL_ACTION: "approve_all", REJECT_ALL_ACTION: "reject_all",
        }  # fmt: skip
        await self._store(approval_id, user_id, batch.get(action_id, "approve"), origin, card)

    async def accept_details(self, body: dict[str, Any], action: dict[str, Any]) -> None:
        """A folded card's "Show details": the whole card in a modal, for whoever may see the
        card (the click must be on a copy of that approval's card; on a task: the ack does
        not wait)."""
        click = parse_click(body, action, await self.installation.identity(request_team(body)))
        if click is None:
            log.warning("slack: a malformed details click was ignored")
            return
        approval_id, _, card = click
        self.spawn(self._open_details(approval_id, body, card), f"details {approval_id}")

    async def _open_details(self, approval_id: str, body: dict[str, Any], card: CardClick) -> None:
        view = await self.decisions.view(approval_id, click=card)
        if view is None:
            log.warning("slack: details of approval %s asked from another card", approval_id)
            return
        trigger = _str(body.get("trigger_id"))
        client = await self.surface.client_for(request_team(body))
        await client.views_open(trigger_id=trigger, view=render_details_modal(view))

    async def _open_dialog(
        self,
        approval_id: str,
        user_id: str,
        body: dict[str, Any],
        origin: dict[str, str],
        card: CardClick,
        decision: Decision,
    ) -> None:
        """Open the decision's dialog only for someone who may decide that way; tell anyone
        else at once."""
        if decision == "approve_edited":
            form = await self.decisions.edit_form(
                approval_id, user_id, platform=PLATFORM, click=card
            )
            if not isinstance(form, EditForm):
                await self._tell(origin, user_id, form.message)
                return
            view = render_edit_modal(form, origin)
            client = await self.surface.client_for(request_team(body))
            await client.views_open(trigger_id=_str(body.get("trigger_id")), view=view)
            return
        refused = await self.decisions.refusal(
            approval_id, user_id, decision, platform=PLATFORM, click=card
        )
        if refused is not None:
            await self._tell(origin, user_id, refused.message)
            return
        if decision == "approve_thread":
            shown = await self.decisions.view(approval_id)
            if shown is None:
                return
            view = render_grant_modal(approval_id, origin, shown)
        elif decision == "request_changes":
            view = render_changes_modal(approval_id, origin, _card_title(body))
        elif decision == "approve":
            view = render_approve_modal(approval_id, origin, _card_title(body))
        else:
            view = render_reject_modal(approval_id, origin, _card_title(body))
        client = await self.surface.client_for(request_team(body))
        await client.views_open(trigger_id=_str(body.get("trigger_id")), view=view)

    async def accept_reject_submission(self, body: dict[str, Any]) -> None:
        """The reject dialog was submitted (an empty reason is allowed): stored before the ack."""
        submitted = _submitted(body, await self.installation.identity(request_team(body)))
        if submitted is None:
            log.warning("slack: a malformed dialog submission was ignored")
            return
        approval_id, user_id, origin, values, card = submitted
        entered = _field(values, REASON_BLOCK, REASON_INPUT)
        reason = _str(entered.get("value")).strip()
        await self._store(approval_id, user_id, "reject", origin, card, reason=reason)

    async def accept_approve_submission(self, body: dict[str, Any]) -> None:
        """The approve dialog was submitted: approve, the comment kept with the decision."""
        submitted = _submitted(body, await self.installation.identity(request_team(body)))
        if submitted is None:
            log.warning("slack: a malformed dialog submission was ignored")
            return
        approval_id, user_id, origin, values, card = submitted
        comment = _str(_field(values, REASON_BLOCK, REASON_INPUT).get("value")).strip()
        await self._store(approval_id, user_id, "approve", origin, card, reason=comment)

    async def accept_changes_submission(self, body: dict[str, Any]) -> None:
        """The request-changes dialog was submitted (Slack requires its text): stored."""
        submitted = _submitted(body, await self.installation.identity(request_team(body)))
        if submitted is None:
            log.warning("slack: a malformed dialog submission was ignored")
            return
        approval_id, user_id, origin, values, card = submitted
        guidance = _str(_field(values, REASON_BLOCK, REASON_INPUT).get("value")).strip()
        await self._store(approval_id, user_id, "request_changes", origin, card, reason=guidance)

    async def accept_edit_submission(self, body: dict[str, Any]) -> dict[str, Any] | None:
        """The edit modal was submitted: checked by the broker first; a bad edit returns the
        `response_action: errors` reply (nothing stored), a good one is stored before the ack
        as an approval of the edited call."""
        submitted = _submitted(body, await self.installation.identity(request_team(body)))
        if submitted is None:
            log.warning("slack: a malformed dialog submission was ignored")
            return None
        approval_id, user_id, origin, values, card = submitted
        base = origin.pop("fingerprint", "")
        checked = await self.decisions.check_edit(
            approval_id, user_id, submitted_values(values), fingerprint=base,
            platform=PLATFORM, click=card,
        )  # fmt: skip
        if not checked.ok or checked.arguments is None:
            reply = errors_reply(checked.errors, values)
            if reply["errors"]:
                return reply
            await self._tell(origin, user_id, checked.message())
            return None
        await self._store(approval_id, user_id, "approve_edited", origin, card,
                          arguments=dict(checked.arguments), fingerprint=base)  # fmt: skip
        return None

    async def accept_grant_submission(self, body: dict[str, Any]) -> None:
        """The grant dialog was submitted: approve for the thread, for the users picked."""
        submitted = _submitted(body, await self.installation.identity(request_team(body)))
        if submitted is None:
            log.warning("slack: a malformed dialog submission was ignored")
            return
        approval_id, user_id, origin, values, card = submitted
        picked = _field(values, GRANTEES_BLOCK, GRANTEES_INPUT).get("selected_users")
        grantees = (
            tuple(u for u in picked if isinstance(u, str) and u) if isinstance(picked, list) else ()
        )
        await self._store(approval_id, user_id, "approve_thread", origin, card, grantees=grantees)

    async def _store(
        self,
        approval_id: str,
        user_id: str,
        decision: Decision,
        origin: dict[str, str],
        card: CardClick,
        *,
        reason: str = "",
        grantees: tuple[str, ...] = (),
        arguments: dict[str, Any] | None = None,
        fingerprint: str = "",
    ) -> None:
        record = DecisionRecord(
            platform=PLATFORM,
            approval_id=approval_id,
            user_id=user_id,
            decision=decision,
            reason=reason,
            grantees=grantees,
            reply_to=origin_thread(origin),
            card=card,
            arguments=arguments,
            fingerprint=fingerprint,
        )
        await self.inbox.accept_decision(record)

    async def _tell(self, origin: dict[str, str], user_id: str, message: str) -> None:
        """A private note to the clicker in the card's thread (from the App Home: in their
        direct messages with the bot)."""
        if origin.get(INBOX_ORIGIN):
            client = await self.surface.client_for(origin.get("team", ""))
            await client.chat_postMessage(channel=user_id, text=message)
            return
        thread = origin_thread(origin)
        if thread is not None:
            await self.surface.notify_user(thread, user_id, message)


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


def _field(values: dict[str, Any], block: str, element: str) -> dict[str, Any]:
    """One input's state in a submitted dialog (an empty mapping when it is not there)."""
    entry = values.get(block) if isinstance(values.get(block), dict) else {}
    found = entry.get(element) if isinstance(entry, dict) else None
    return found if isinstance(found, dict) else {}


def parse_click(
    body: dict[str, Any], action: dict[str, Any], me: SlackIdentity
) -> tuple[str, str, CardClick] | None:
    """(approval id, clicker, the card clicked) from a verified `block_actions` payload, or
    None when a field it must carry is missing or not a string."""
    user, container = body.get("user"), body.get("container")
    if not isinstance(user, dict) or not isinstance(container, dict):
        return None
    approval_id, user_id = _str(action.get("value")), _str(user.get("id"))
    if container.get("type") == "view":  # a button in the App Home, never in a modal
        view = body.get("view") if isinstance(body.get("view"), dict) else {}
        if view.get("type") != "home" or not (approval_id and user_id):
            return None
        card = CardClick(platform=PLATFORM, workspace=me.team_id, channel="", message_id="",
                         external=is_external(body, me), inbox=True)  # fmt: skip
        return approval_id, user_id, card
    channel, message_ts = _str(container.get("channel_id")), _str(container.get("message_ts"))
    if not (approval_id and user_id and channel and message_ts):
        return None
    card = CardClick(platform=PLATFORM, workspace=me.team_id, channel=channel,
                     message_id=message_ts, external=is_external(body, me))  # fmt: skip
    return approval_id, user_id, card


def _submitted(
    body: dict[str, Any], me: SlackIdentity
) -> tuple[str, str, dict[str, str], dict[str, Any], CardClick] | None:
    """A dialog's approval id, submitter, the card's origin (its private metadata, ours,
    round-tripped by Slack), its values and the card; None when any is malformed."""
    view, user = body.get("view"), body.get("user")
    if not isinstance(view, dict) or not isinstance(user, dict) or not _str(user.get("id")):
        return None
    try:
        origin = json.loads(_str(view.get("private_metadata")) or "{}")
    except ValueError:
        return None
    if not isinstance(origin, dict) or not all(isinstance(v, str) for v in origin.values()):
        return None
    approval_id, card_ts = origin.pop("approval_id", ""), origin.pop("card_ts", "")
    inbox = bool(origin.get(INBOX_ORIGIN))  # the dialog was opened from the App Home
    if not approval_id or (not inbox and (not card_ts or not origin.get("channel"))):
        return None
    state = view.get("state") if isinstance(view.get("state"), dict) else {}
    values = state.get("values") if isinstance(state.get("values"), dict) else {}
    card = CardClick(platform=PLATFORM, workspace=me.team_id, channel=origin.get("channel", ""),
                     message_id=card_ts, external=is_external(body, me),
                     inbox=inbox)  # fmt: skip
    return approval_id, _str(user.get("id")), origin, values, card


def origin_thread(origin: dict[str, str]) -> ThreadRef | None:
    if not origin.get("channel"):
        return None
    return ThreadRef(
        PLATFORM, origin.get("team", ""), origin["channel"], origin.get("thread_ts", "")
    )


def click_origin(body: dict[str, Any]) -> dict[str, str]:
    """Where a clicked card lives (team, channel, thread), for ephemeral replies."""
    container = body.get("container") if isinstance(body.get("container"), dict) else {}
    message = body.get("message") if isinstance(body.get("message"), dict) else {}
    team = body.get("team") if isinstance(body.get("team"), dict) else {}
    thread_ts = message.get("thread_ts") or container.get("thread_ts") or message.get("ts")
    return {
        "team": _str(team.get("id")),
        "channel": _str(container.get("channel_id")),
        "thread_ts": _str(thread_ts),
    }


def _card_title(body: dict[str, Any]) -> str:
    message = body.get("message") if isinstance(body.get("message"), dict) else {}
    blocks = message.get("blocks") if isinstance(message.get("blocks"), list) else []
    for block in blocks:
        if not isinstance(block, dict) or block.get("type") != "header":
            continue
        text = block.get("text")
        if isinstance(text, dict) and _str(text.get("text")):
            return _str(text.get("text"))
    return "this tool call"
