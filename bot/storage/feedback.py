"""Queries for what people do to a run from the chat: Stop, and thumbs up or down on its answer.

A click names the message it was made on (the platform says so in its signed payload); these
find the run that message belongs to, so nothing a button carried decides which run is meant.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from sqlalchemy import update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, select

from bot.clock import utcnow
from bot.statuses import RunStatus
from bot.storage.models import Conversation, Run, RunFeedback

Rating = Literal["up", "down"]
MessageKind = Literal["status", "answer"]
_RUN = Run.__table__.c  # type: ignore[attr-defined]
_FEEDBACK = RunFeedback.__table__.c  # type: ignore[attr-defined]


def run_for_message(
    session: Session,
    platform: str,
    channel: str,
    message_id: str,
    *,
    kind: MessageKind,
    workspace: str | None = None,
) -> Run | None:
    """The run whose status message (or answer message) is `message_id` in `channel`."""
    column = Run.status_message_id if kind == "status" else Run.answer_message_id
    statement = (
        select(Run)
        .join(Conversation, Run.conversation_id == Conversation.id)  # type: ignore[arg-type]
        .where(
            column == message_id,
            Conversation.platform == platform,
            Conversation.channel == channel,
        )
    )
    if workspace is not None:
        statement = statement.where(Conversation.workspace == workspace)
    return session.exec(statement.limit(1)).first()


def run_with_conversation(session: Session, run_id: str) -> tuple[Run, Conversation] | None:
    row = session.exec(
        select(Run, Conversation)
        .join(Conversation, Run.conversation_id == Conversation.id)  # type: ignore[arg-type]
        .where(Run.id == run_id)
    ).first()
    return (row[0], row[1]) if row is not None else None


def mark_stopped(session: Session, run_id: str, user_id: str, live: tuple[RunStatus, ...]) -> bool:
    """Record who stopped a still-live run; False when it had ended or was stopped already
    (the first Stop wins, like the first decision on an approval)."""
    statement = (
        update(Run.__table__)  # type: ignore[arg-type]
        .where(_RUN.id == run_id, _RUN.status.in_(live), _RUN.stopped_by.is_(None))
        .values(stopped_by=user_id)
    )
    return session.connection().execute(statement).rowcount == 1


def record_feedback(
    session: Session, run_id: str, platform: str, user_id: str, rating: Rating
) -> Literal["new", "changed", "same"]:
    """One person's rating of a run's answer: a new row, their earlier one changed, or the same
    again (a double click). Rows are unique per (run, person): of two first clicks at once,
    the second finds the first's row and changes it."""
    now = utcnow()
    try:
        with session.begin_nested():
            session.add(RunFeedback(run_id=run_id, platform=platform, user_id=user_id,
                                    rating=rating, created_at=now, updated_at=now))  # fmt: skip
        return "new"
    except IntegrityError:
        pass  # they rated this answer before: change their row
    changed = session.connection().execute(
        update(RunFeedback.__table__)  # type: ignore[arg-type]
        .where(_FEEDBACK.run_id == run_id, _FEEDBACK.user_id == user_id, _FEEDBACK.rating != rating)
        .values(rating=rating, updated_at=now)
    )
    return "changed" if changed.rowcount else "same"


def ratings_by(session: Session, run_ids: Sequence[str], user_id: str) -> dict[str, str]:
    """One person's ratings of these runs' answers (run id -> up or down): what their thumbs
    show as pressed when the page is loaded again."""
    if not run_ids:
        return {}
    rows = session.exec(
        select(RunFeedback.run_id, RunFeedback.rating).where(
            RunFeedback.run_id.in_(list(run_ids)),  # type: ignore[attr-defined]
            RunFeedback.user_id == user_id,
        )
    ).all()
    return {run_id: rating for run_id, rating in rows}
