"""Feedback: thumbs up or down on an answer, stored with its run (one per person, changeable).

A click is stored in the inbox before the platform gets its 200 (`Inbox.accept_feedback`);
applying it finds the run whose answer message the click was made on (the console names its
run, and only a console run counts there), then records the person's rating. A click on a
message that is no answer changes nothing.
"""

from __future__ import annotations

import logging

from bot.chat.controls import RATINGS, FeedbackClick
from bot.chat.threads import MessageRef
from bot.storage import feedback as feedback_queries
from bot.storage.database import Database
from bot.storage.feedback import MessageKind

log = logging.getLogger(__name__)


async def run_of_message(
    db: Database, platform: str, message: MessageRef, *, kind: MessageKind
) -> str | None:
    """The id of the run whose status (or answer) message a click was made on, or None."""
    where = message.thread
    run = await db.run(
        feedback_queries.run_for_message, platform, where.channel, message.message_id,
        kind=kind, workspace=where.workspace or None,
    )  # fmt: skip
    return run.id if run is not None else None


class FeedbackRecorder:
    """Applies stored feedback clicks (the inbox's handler for them)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def __call__(self, click: FeedbackClick) -> str | None:
        """Record the rating; the outcome (new, changed, same), or None when the click names
        no answer it may rate."""
        if click.rating not in RATINGS or not click.user_id:
            return None
        run_id = await self._run_of(click)
        if run_id is None:
            log.info("%s feedback on a message that is no answer was ignored", click.platform)
            return None
        return await self._db.run(
            feedback_queries.record_feedback, run_id, click.platform, click.user_id, click.rating
        )

    async def _run_of(self, click: FeedbackClick) -> str | None:
        if click.message is not None:
            return await run_of_message(self._db, click.platform, click.message, kind="answer")
        found = await self._db.run(feedback_queries.run_with_conversation, click.run_id)
        if found is None:
            return None
        run, conversation = found
        answered = run.answer_message_id is not None
        return run.id if answered and conversation.platform == click.platform else None
