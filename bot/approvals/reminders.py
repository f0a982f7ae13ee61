"""Reminders before expiry: at `CHATOPS_APPROVAL_REMIND_AT` of an approval's timeout, each
named approver who has not answered yet gets one direct message with a copy of the card (its
buttons work like the thread's: the copy is recorded as every other copy is).

"One" is kept by the database, not by memory: an approver's reminder is claimed (a unique
`approval_reminder` row) before it is sent, so a wait resumed after a restart, or a second
process on the same PostgreSQL database, never sends it twice. A crash between the claim and
the send loses that one reminder (at most once, never twice). Who is reminded is read when the
reminder is due: the approvers as escalation left them, within the approvers of the card's
workspace (`CHATOPS_WORKSPACES_FILE`: its groups, its approvers narrowing the row's), minus
those who answered already (a quorum's approvals so far) and, under four-eyes, the
requesters (they may not approve). Nobody named there (anyone in the thread may decide) means
nobody to write to: the card waits in the thread. A platform without direct messages (the
console) sends none.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from datetime import datetime
from typing import TYPE_CHECKING

from bot.approvals.authority import ApproversOf
from bot.approvals.cards import requesters_of
from bot.chat.text import describe_duration
from bot.clock import as_utc
from bot.statuses import ApprovalStatus
from bot.storage import approval_queries
from bot.storage.database import Database
from bot.storage.models import Approval

if TYPE_CHECKING:
    from bot.approvals.routing import CardKeeper

log = logging.getLogger(__name__)


def remind_at(row: Approval, share: float) -> datetime | None:
    """When the row's approvers are reminded: `share` of the way from its creation to its
    deadline (None: reminders are off, or the row is not pending)."""
    if share <= 0 or row.status != ApprovalStatus.PENDING:
        return None
    created, expires = as_utc(row.created_at), as_utc(row.expires_at)
    return created + (expires - created) * share


def reminder_note(row: Approval, now: datetime) -> str:
    """The line the reminder's copy of the card carries above its buttons."""
    left = max(1, round((as_utc(row.expires_at) - now).total_seconds()))
    left = round(left / 60) * 60 if left >= 60 else left  # "30 min", not "29.98 min"
    at = as_utc(row.expires_at).strftime("%H:%M UTC")
    return (
        f"Reminder: nobody has decided yet. This request expires in {describe_duration(left)} "
        f"(at {at}); after that it is recorded as expired and the call does not run."
    )


def due_people(row: Approval, approvers: Collection[str], answered: Collection[str]) -> list[str]:
    """Who a reminder goes to: the approvers who have not answered, without the requesters
    when they may not approve (four-eyes)."""
    barred = set() if row.allow_self_approval else set(requesters_of(row))
    return sorted(set(approvers) - set(answered) - barred)


class Reminders:
    """Sends an approval's reminders (owned by the broker; its wait loop says when)."""

    def __init__(
        self,
        db: Database,
        cards: CardKeeper,
        approvers_of: ApproversOf,
        *,
        share: float,
    ) -> None:
        """`approvers_of`: who may decide in an approval's workspace (the broker's: its
        groups resolved, its approvers narrowing the row's); `share`:
        `CHATOPS_APPROVAL_REMIND_AT`."""
        self._db = db
        self._cards = cards
        self._approvers_of = approvers_of
        self._share = share

    def due_at(self, row: Approval) -> datetime | None:
        """When this row's reminders are due (None: never)."""
        if self._approvers_of(row).deciders(row.approvers) is None:
            return None  # anyone may decide: nobody to write to
        if not self._cards.has_direct_messages(row.card_platform or ""):
            return None
        return remind_at(row, self._share)

    async def send(self, approval_id: str, now: datetime) -> list[str]:
        """Remind each approver of a still-pending approval who was not reminded yet; returns
        whom this call reminded (a failed send is logged: the wait goes on)."""
        row = await self._db.run(approval_queries.get_approval, approval_id)
        if row is None or row.status != ApprovalStatus.PENDING:
            return []
        answered = await self._db.run(approval_queries.answered_by, row.id)
        people = due_people(row, self._approvers_of(row).deciders(row.approvers) or (), answered)
        note = reminder_note(row, now)
        sent: list[str] = []
        for user in people:
            if not await self._db.run(approval_queries.claim_reminder, row.id, user):
                log.info("approval %s: %s was reminded already", row.id, user)
                continue
            try:
                await self._cards.post_reminder(row, user, note)
            except Exception:  # noqa: BLE001 - one lost reminder must not stop the others
                log.exception("the reminder of approval %s to %s failed", row.id, user)
                continue
            sent.append(user)
        if sent:
            log.info("approval %s: reminded %s", row.id, ", ".join(sent))
        return sent
