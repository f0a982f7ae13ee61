"""The escalation ladder: when nobody decides, tier by tier more approvers become eligible.

Everything is read from the approval row, so any process (the waiter's, or the one a click
reaches) computes the same thing after a restart: tier `i` is due at `created_at +
escalate[i].after_s`; `escalation_level` says how many tiers were applied, and applying one is
a conditional UPDATE on that level (`bot.storage.approval_queries.escalate_approval`), so it happens
exactly once. Applying adds the tier's approvers to the row's (a row with no approvers, meaning
anyone in the thread, stays open to anyone), mentions them where the card is, gives them a
copy of the card in DM when the route is `dm`, and edits every copy to say so. A timeout still
ends as `expire` or `reject`: escalation never approves anything.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from bot.approvals import authority
from bot.approvals.cards import describe_tier, requesters_of, tiers
from bot.approvals.types import ApprovalOutcome
from bot.clock import Clock, as_utc
from bot.statuses import ApprovalStatus
from bot.storage import approval_queries
from bot.storage.database import Database
from bot.storage.models import Approval

if TYPE_CHECKING:
    from bot.approvals.reminders import Reminders
    from bot.approvals.routing import CardKeeper

log = logging.getLogger(__name__)


def tier_due(row: Approval, index: int) -> datetime:
    return as_utc(row.created_at) + timedelta(seconds=float(tiers(row)[index]["after_s"]))


def next_tier_at(row: Approval) -> datetime | None:
    """When the next tier is due (None: every tier applied, or no ladder)."""
    if row.status != ApprovalStatus.PENDING or row.escalation_level >= len(tiers(row)):
        return None
    return tier_due(row, row.escalation_level)


def due_level(row: Approval, now: datetime) -> int:
    """How many tiers are due at `now` (tiers come in order of increasing `after_s`)."""
    return sum(1 for i in range(len(tiers(row))) if tier_due(row, i) <= now)


def widened(row: Approval, to_level: int) -> list[str]:
    """The eligible approvers once tiers up to `to_level` applied (none listed stays none:
    anyone in the thread may already decide)."""
    if not row.approvers:
        return []
    added = [str(a) for t in tiers(row)[row.escalation_level : to_level] for a in t["approvers"]]
    return list(dict.fromkeys([*row.approvers, *added]))


class Escalator:
    """Applies due tiers of one approval (for the broker's wait loop and its click check)."""

    def __init__(
        self,
        db: Database,
        cards: CardKeeper,
        approvers_of: authority.ApproversOf,
    ) -> None:
        """`approvers_of`: who may decide in an approval's workspace (the broker's): the new
        tier's people outside it are neither mentioned nor sent a copy."""
        self._db = db
        self._cards = cards
        self._approvers_of = approvers_of

    async def wait(
        self,
        row: Approval,
        future: asyncio.Future[ApprovalOutcome],
        clock: Clock,
        *,
        remind_after_s: float,
        expire: Callable[[str], Awaitable[ApprovalOutcome]],
        reminders: Reminders | None = None,
    ) -> ApprovalOutcome:
        """The broker's wait for a pending row: until the decision, the row's deadline
        (`expire`), the one-off reminder (`CHATOPS_APPROVAL_ESCALATE_AFTER_S`, replaced by a
        ladder), the approvers' direct-message reminders (`reminders`, at
        `CHATOPS_APPROVAL_REMIND_AT` of the timeout) or the next tier, all read from the row
        (and the reminders claimed in the database) so a restarted wait picks up there."""
        expires = as_utc(row.expires_at)
        dm_at = reminders.due_at(row) if reminders is not None else None
        remind_at = as_utc(row.created_at) + timedelta(seconds=remind_after_s)
        # no reminder once the deadline is reached (a resumed approval that expired while down)
        reminded = row.escalated or remind_after_s <= 0 or bool(row.escalate)
        reminded = reminded or max(remind_at, clock.now()) >= expires
        stuck = -1  # a tier that could not be applied (the database failed): not retried
        while True:
            tier_at = next_tier_at(row) if row.escalation_level != stuck else None
            deadline = min(expires, tier_at or expires, expires if reminded else remind_at,
                           dm_at or expires)  # fmt: skip
            if await clock.wait(future, deadline):
                return future.result()
            now = clock.now()
            if now >= expires:
                return await expire(row.id)
            if tier_at is not None and now >= tier_at:
                level = row.escalation_level
                try:
                    row = await self.apply_due(row, now)
                except Exception:  # noqa: BLE001 - the wait goes on; the deadline still holds
                    log.exception("escalating approval %s failed", row.id)
                if row.status != ApprovalStatus.PENDING:
                    return authority.outcome(row)
                stuck = level if row.escalation_level == level else -1
            elif dm_at is not None and now >= dm_at and reminders is not None:
                dm_at = None
                try:
                    await reminders.send(row.id, now)
                except Exception:  # noqa: BLE001 - a lost reminder must not end the wait
                    log.exception("the reminders of approval %s failed", row.id)
            elif not reminded and now >= remind_at:
                reminded = True
                try:
                    await self.remind(row, requesters_of(row))
                except Exception:  # noqa: BLE001 - a lost reminder must not end the wait
                    log.exception("the reminder of approval %s failed", row.id)

    async def apply_due(self, row: Approval, now: datetime) -> Approval:
        """Apply every tier due at `now` that was not applied yet; the row as it is after."""
        target = due_level(row, now)
        if row.status != ApprovalStatus.PENDING or target <= row.escalation_level:
            return row
        level = row.escalation_level
        won, fresh = await self._db.run(
            approval_queries.escalate_approval,
            row.id,
            level=level,
            to_level=target,
            approvers=widened(row, target),
        )
        if fresh is None:
            return row
        if won:
            log.info("approval %s escalated to tier %d of %d", row.id, target, len(tiers(row)))
            try:
                await self._announce(fresh, tiers(row)[level:target])
            except Exception:  # noqa: BLE001 - the tier applies even if telling about it fails
                log.exception("announcing the escalation of approval %s failed", row.id)
        return fresh

    async def _announce(self, row: Approval, reached: list[dict[str, Any]]) -> None:
        """Mention the new approvers where the card is, DM them a copy on a `dm` route, and
        show the tier on every copy."""
        names = [str(a) for tier in reached for a in tier["approvers"]]
        people = sorted(self._approvers_of(row).deciders(names) or ())
        await self._cards.update(row)
        if row.route == "dm":
            await self._cards.add_dm_copies(row, people)
        last = reached[-1]
        text = (
            f"Nobody has decided on `{row.tool_name}` yet: {describe_tier(last)}. "
            "You may now approve or reject it."
        )
        await self._cards.post_near_copies(row, text, mention=tuple(people))

    async def remind(self, row: Approval, requesters: Sequence[str]) -> None:
        """No ladder: remind the approvers next to the card, once (the row says it was done)."""
        if not await self._db.run(approval_queries.mark_reminded, row.id):
            return  # another waiter (a process before a restart) reminded already
        mention = tuple(sorted(self._approvers_of(row).deciders(row.approvers) or ()))
        who = "the approvers" if mention else "anyone in this thread"
        asked = ", ".join(requesters) or "unknown"
        text = f"Still waiting for {who} to approve `{row.tool_name}` (requested by {asked})."
        await self._cards.post_near_copies(row, text, mention=mention)
