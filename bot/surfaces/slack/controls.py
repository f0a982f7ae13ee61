"""Slack's run controls: the Stop button, Slack's native stop (`agent_session_stopped`), and the
answer's feedback buttons, each from a verified payload.

The person is the payload's `user` (or the event's `user`), never anything a button carried;
the run is found from the message the click was made on (`container`: channel and message) or
the session's thread (the native stop), by the run manager's `stop` port. A Stop is decided
before bolt acknowledges it (a person who may not stop a run is told so privately, after the
ack); a feedback click is stored in the inbox before the ack, like an approval click.
"""

from __future__ import annotations

import logging
from typing import Any

from bot.chat.controls import RATINGS, FeedbackClick, StopRequest, StopResult
from bot.chat.ports import InboxPort, Stop
from bot.chat.threads import MessageRef, ThreadRef
from bot.surfaces.slack.clicks import PLATFORM, Spawn
from bot.surfaces.slack.identity import SlackInstallation, request_team
from bot.surfaces.slack.outbound import SlackSurface

log = logging.getLogger(__name__)


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


class SlackControls:
    """Stop and feedback clicks, and the native stop event (see the module docstring)."""

    def __init__(
        self,
        stop: Stop,
        inbox: InboxPort,
        surface: SlackSurface,
        installation: SlackInstallation,
        spawn: Spawn,
    ) -> None:
        self._stop = stop
        self._inbox = inbox
        self._surface = surface
        self._installation = installation
        self._spawn = spawn

    async def _clicked(self, body: dict[str, Any]) -> tuple[str, MessageRef] | None:
        """(the clicker, the message clicked) from a verified `block_actions` payload."""
        user, container = _dict(body.get("user")), _dict(body.get("container"))
        message = _dict(body.get("message"))
        user_id = _str(user.get("id"))
        channel, ts = _str(container.get("channel_id")), _str(container.get("message_ts"))
        if not (user_id and channel and ts):
            return None
        me = await self._installation.identity(request_team(body))
        root = _str(message.get("thread_ts")) or _str(container.get("thread_ts")) or ts
        return user_id, MessageRef(ThreadRef(PLATFORM, me.team_id, channel, root), ts)

    async def accept_stop_click(self, body: dict[str, Any]) -> None:
        """The status message's Stop button."""
        clicked = await self._clicked(body)
        if clicked is None:
            log.warning("slack: a malformed stop click was ignored")
            return
        user_id, message = clicked
        result = await self._stop(StopRequest(platform=PLATFORM, user_id=user_id, message=message))
        self._tell_unless_stopping(result, message.thread, user_id)

    async def accept_feedback(self, body: dict[str, Any], action: dict[str, Any]) -> None:
        """A thumbs up or down under an answer: stored before the ack."""
        clicked = await self._clicked(body)
        rating = _str(action.get("value"))
        if clicked is None or rating not in RATINGS:
            log.warning("slack: a malformed feedback click was ignored")
            return
        user_id, message = clicked
        click = FeedbackClick(
            platform=PLATFORM,
            user_id=user_id,
            rating=rating,
            message=message,  # type: ignore[arg-type]
        )
        await self._inbox.accept_feedback(click)

    async def accept_stop_event(self, body: dict[str, Any]) -> None:
        """`agent_session_stopped`: someone pressed Slack's own stop on the run's session."""
        event = _dict(body.get("event"))
        user_id, channel = _str(event.get("user")), _str(event.get("channel"))
        root, team = _str(event.get("thread_ts")), _str(body.get("team_id"))
        if not (user_id and channel and root and team):
            log.warning("slack: an agent_session_stopped event without its thread was ignored")
            return
        thread = ThreadRef(PLATFORM, team, channel, root)
        result = await self._stop(StopRequest(platform=PLATFORM, user_id=user_id, thread=thread))
        self._tell_unless_stopping(result, thread, user_id)

    def _tell_unless_stopping(self, result: StopResult, thread: ThreadRef, user_id: str) -> None:
        """A stop that did nothing is said to the person who asked, privately, after the ack;
        one that works shows in the thread (the status message, then who stopped it)."""
        if result.status == "stopping":
            return
        self._spawn(
            self._surface.notify_user(thread, user_id, result.message),
            f"stop refusal {result.run_id}",
        )
