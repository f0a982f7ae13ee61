"""What follows a change of an approval row: its waiter woken (here, or through a wake-up in the
process whose run waits), its time to decision counted, every copy of its card updated; and the
changes nobody clicked (a deadline passed, the run ended).

Only the call that changed the row (the winner of its conditional UPDATE) counts it, wakes the
other process and updates the cards; a local waiter is woken either way.
"""

from __future__ import annotations

from bot.approvals import authority
from bot.approvals.routing import CardKeeper
from bot.approvals.types import ApprovalOutcome
from bot.approvals.waiters import Waiters
from bot.clock import Clock, as_utc
from bot.observability.metrics import Metrics
from bot.statuses import ApprovalStatus
from bot.storage import approval_queries
from bot.storage.database import Database
from bot.storage.models import Approval
from bot.storage.wakeups import Wakeup, Wakeups


class Settler:
    """Owned by the broker; shares its waiters, cards, wake-ups, clock and metrics."""

    def __init__(
        self,
        db: Database,
        *,
        waiters: Waiters,
        cards: CardKeeper,
        wakeups: Wakeups,
        clock: Clock,
        metrics: Metrics | None,
    ) -> None:
        """`clock`: the broker's (time to decision is read in it); `metrics`: the runtime's, or
        None (nothing counted)."""
        self._db = db
        self._waiters = waiters
        self._cards = cards
        self._wakeups = wakeups
        self._clock = clock
        self._metrics = metrics

    async def expire(self, approval_id: str) -> ApprovalOutcome:
        """Nobody decided in time: expired, or rejected where the policy says a timeout is a
        rejection (`on_timeout: reject`); never approved."""
        row = await self._db.run(approval_queries.get_approval, approval_id)
        rejects = row is not None and row.on_timeout == "reject"
        won = await self._db.run(
            approval_queries.conclude_approval,
            approval_id,
            ApprovalStatus.REJECTED if rejects else ApprovalStatus.EXPIRED,
            decided_by=[],
            reason="timeout",
        )
        return await self.finish(approval_id, changed=won)

    async def cancel_run(self, run_id: str, *, reason: str) -> None:
        """The run ended: its pending approvals end as cancelled, cards updated."""
        for row in await self._db.run(approval_queries.pending_approvals_for_run, run_id):
            won = await self._db.run(
                approval_queries.conclude_approval,
                row.id,
                ApprovalStatus.CANCELLED,
                decided_by=[],
                reason=reason,
            )
            await self.finish(row.id, changed=won)

    async def finish(
        self, approval_id: str, *, changed: bool, row: Approval | None = None
    ) -> ApprovalOutcome:
        """After a transition: wake the waiter, update the card if this call changed it."""
        if row is None:
            row = await self._db.run(approval_queries.get_approval, approval_id)
        if row is None:
            raise LookupError(f"approval {approval_id} vanished")
        outcome = authority.outcome(row)
        waited_here = self._waiters.settle(row)
        if changed:
            self._count_decision(row)
            # its run may wait elsewhere
            if not waited_here and row.status != ApprovalStatus.PENDING:
                await self._wakeups.send(Wakeup("approval", run_id=row.run_id, approval_id=row.id))
            await self._cards.update(row)
        return outcome

    def _count_decision(self, row: Approval) -> None:
        """Time to decision, once per approval: only the call that changed the row gets here."""
        if self._metrics is None or row.status == ApprovalStatus.PENDING:
            return
        waited = (self._clock.now() - as_utc(row.created_at)).total_seconds()
        self._metrics.approval_decided(
            row.connector,
            row.action,
            row.policy_rule,
            str(row.status),
            waited,
            where=(row.card_platform, row.card_workspace) if row.card_platform else None,
        )
