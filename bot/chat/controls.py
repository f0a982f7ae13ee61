"""What people do to a run from the chat: Stop it, rate its answer. The messages between a
surface and the runtime (the `stop` port and the inbox's `accept_feedback`).

A click names the message it was made on and the platform's verified user; which run is meant
is worked out server-side from that message (a Stop button is on the run's status message, the
feedback buttons on its answer), never from anything the button carried. The console names
its run by id (its page has no signed payload; its guard is the console token).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from bot.chat.threads import MessageRef, ThreadRef

Rating = Literal["up", "down"]
RATINGS: tuple[Rating, ...] = ("up", "down")
StopStatus = Literal["stopping", "already_stopping", "refused", "not_running", "not_found"]


@dataclass(frozen=True, kw_only=True)
class StopRequest:
    """Someone pressed Stop. Exactly one locator says which run: `message` (the status message
    the button was on), `thread` (Slack's native stop: the session's thread) or `run_id` (the
    console)."""

    platform: str
    user_id: str
    message: MessageRef | None = None
    thread: ThreadRef | None = None
    run_id: str = ""


@dataclass(frozen=True)
class StopResult:
    """What came of a Stop: `message` is what the person is told (privately when refused)."""

    status: StopStatus
    message: str
    run_id: str = ""


STOP_MESSAGES: dict[StopStatus, str] = {
    "stopping": "Stopping the run.",
    "already_stopping": "This run is already being stopped.",
    "refused": "Only the people who asked for this run, or who may approve its steps, can stop it.",
    "not_running": "This run has already ended.",
    "not_found": "There is no run to stop here.",
}


def stop_result(status: StopStatus, run_id: str = "") -> StopResult:
    return StopResult(status, STOP_MESSAGES[status], run_id)


@dataclass(frozen=True, kw_only=True)
class FeedbackClick:
    """A thumbs up or down on an answer, as the verified payload said it. `message`: the answer
    message it was made on (chat platforms); `run_id`: the console's run."""

    platform: str
    user_id: str
    rating: Rating
    message: MessageRef | None = None
    run_id: str = ""
