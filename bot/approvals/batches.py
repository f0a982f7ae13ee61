"""Batches: the calls of one model response that need approval share one card.

Each call keeps its own approval row, fingerprint, quorum, grant rules and call-log entry; the
batch (`Approval.batch_id`, the run id and step) only groups their card. The card lists every
call with its own state and buttons, plus Approve all / Reject all. "All" is judged here,
server-side, at decision time: the clicker must be allowed to answer that way on EVERY call
of the batch still pending (the same checks as one click on each: the card, the platform, the
approvers, four-eyes); if any one refuses, nothing is decided. Approve all is offered only
where somebody could approve every call (`approve_all_offered`); a chat card looks the same to
everyone who reads it, so the check at decision time is what counts.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence

from bot.approvals import authority
from bot.approvals.cards import card_ref, card_view, requesters_of
from bot.chat.decisions import CardClick, Decision, DecisionResult
from bot.chat.views import BatchCardView
from bot.observability.context import bound
from bot.statuses import ApprovalStatus
from bot.storage import approval_queries
from bot.storage.approval_batches import batch_members
from bot.storage.database import Database
from bot.storage.models import Approval

log = logging.getLogger(__name__)

# admit(approval_id, user, decision, platform, click) -> (row, refusal), as the broker's `_admit`
Admit = Callable[
    [str, str, Decision, str, CardClick | None],
    Awaitable[tuple[Approval | None, DecisionResult | None]],
]
# decide one call: (approval_id, decision, reason) -> what deciding it did
DecideOne = Callable[[str, Decision, str], Awaitable[DecisionResult]]

BATCH_DECISIONS: Mapping[str, Decision] = {"approve_all": "approve", "reject_all": "reject"}
# how long an "all" click waits for the card it was made on to be recorded (the post and its
# record are two steps; the record of every call the card shows is one transaction)
CARD_WAIT_S = 5.0
CARD_POLL_S = 0.05
# how long a decision's answer waits for its batch card's record (it lands in milliseconds;
# Feishu wants a card callback answered within 3 s)
SHOWN_WAIT_S = 1.0


class BatchDesk:
    """The broker's side of batches: "all" decisions, and the batch card a result shows."""

    def __init__(self, db: Database, *, approvers_of: authority.ApproversOf) -> None:
        """`approvers_of`: who may decide in an approval's workspace (the broker's)."""
        self._db = db
        self._approvers_of = approvers_of

    async def on_card(self, row: Approval) -> list[tuple[Approval, int]]:
        """The calls of `row`'s batch listed on its card (with their quorum counts); `row`
        alone while its card is not recorded (never every call not yet on a card: those are
        still being posted, or asked after the card was)."""
        shared = card_ref(row)
        members = await self._db.run(batch_members, row.batch_id)
        if shared is None:
            return [(member, n) for member, n in members if member.id == row.id]
        return [(member, n) for member, n in members if card_ref(member) == shared]

    async def once_recorded(
        self, row: Approval, *, pending_only: bool = True, wait_s: float = CARD_WAIT_S
    ) -> Approval:
        """`row` once its card is recorded (or, `pending_only`, it is no longer pending; or
        `wait_s` passed).

        The card is posted first and recorded after, on every call it shows in one transaction
        (`CardKeeper`), possibly by another process. So once the clicked call is on the card,
        so is every call the card showed; calls of the batch with no card yet were asked after
        it was posted and are not on it (an edit shows them once they are recorded)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_s
        while card_ref(row) is None and (row.status == ApprovalStatus.PENDING or not pending_only):
            if loop.time() > deadline:
                break
            await asyncio.sleep(CARD_POLL_S)
            row = await self._db.run(approval_queries.get_approval, row.id) or row
        return row

    async def with_card(self, result: DecisionResult, row: Approval) -> DecisionResult:
        """`result` with the batch card as it stands, when `row`'s card lists its batch. A
        click the posting process took before its record of the card landed (it knows where
        the card is meanwhile) waits for that record: answered with the call's card alone,
        Feishu would show that in place of the batch's."""
        row = await self.once_recorded(row, pending_only=False, wait_s=SHOWN_WAIT_S)
        members = await self.on_card(row)
        if not grouped(members):
            return result
        return dataclasses.replace(result, batch=batch_view(members, self._approvers_of))

    async def decide(
        self,
        approval_id: str,
        user_id: str,
        decision: Decision,
        reason: str,
        *,
        platform: str,
        click: CardClick | None,
        admit: Admit,
        decide_one: DecideOne,
    ) -> DecisionResult:
        """Approve all / Reject all on the card of `approval_id` (any call of the batch)."""
        row = await self._db.run(approval_queries.get_approval, approval_id)
        if row is None:
            return authority.NOT_FOUND
        if row.batch_id:
            row = await self.once_recorded(row)
        members = [member for member, _ in await self.on_card(row)] if row.batch_id else [row]
        result = await decide_all(
            members, user_id, decision, reason, platform=platform, click=click,
            admit=admit, decide_one=decide_one,
        )  # fmt: skip
        with bound(approval_id=approval_id, run_id=row.run_id):
            log.info("batch %s: %s by %s on %s: %s", row.batch_id or row.id, decision, user_id,
                     platform, result.status)  # fmt: skip
        return await self.with_card(result, row) if row.batch_id else result


def batch_view(
    members: Sequence[tuple[Approval, int]], approvers_of: authority.ApproversOf
) -> BatchCardView:
    """The batch card as the rows stand (each with its quorum's count so far)."""
    rows = [row for row, _ in members]
    return BatchCardView(
        batch_id=rows[0].batch_id if rows else "",
        items=tuple(card_view(row, approvals_so_far=count) for row, count in members),
        approve_all_offered=approve_all_offered(rows, approvers_of),
    )


def approve_all_offered(rows: Sequence[Approval], approvers_of: authority.ApproversOf) -> bool:
    """Could anyone approve every pending call of the batch? Each call's approvers in its
    workspace (anyone, when none are named there), minus its requesters under four-eyes; the
    sets must meet."""
    pending = [row for row in rows if row.status == ApprovalStatus.PENDING]
    if len(pending) < 2:
        return bool(pending)
    named: set[str] | None = None  # None: anyone so far
    excluded: set[str] = set()
    for row in pending:
        approvers = approvers_of(row)
        if not row.allow_self_approval:
            excluded |= approvers.people(requesters_of(row))
        listed = approvers.deciders(row.approvers)
        if listed is not None:
            named = listed if named is None else named & listed
    if named is None:
        return True  # anyone may decide every call: somebody not asking can
    return bool(named - excluded)


def grouped(members: Sequence[tuple[Approval, int]]) -> bool:
    """Does the card show a batch (two or more calls)? One call keeps today's card."""
    return len(members) >= 2


async def decide_all(
    members: Sequence[Approval],
    user_id: str,
    decision: str,
    reason: str,
    *,
    platform: str,
    click: CardClick | None,
    admit: Admit,
    decide_one: DecideOne,
) -> DecisionResult:
    """Approve all / Reject all: every pending call of the batch, or none (see the module)."""
    each = BATCH_DECISIONS[decision]
    pending: list[Approval] = []
    for member in members:
        if member.status != ApprovalStatus.PENDING:
            continue
        row, refused = await admit(member.id, user_id, each, platform, click)
        if refused is not None and refused.status == "already_decided":
            continue  # decided meanwhile: not part of "all" any more
        if refused is not None or row is None:
            verb = "approve" if each == "approve" else "reject"
            return DecisionResult(
                refused.status if refused is not None else "not_found",
                f"You may not {verb} every call on this card ({member.tool_name}: "
                f"{refused.message if refused is not None else 'not found'}), so nothing "
                f"was decided. Decide the calls you may one by one.",
            )
        pending.append(row)
    if not pending:
        return DecisionResult("already_decided", "Every call on this card was already decided.")
    results = [await decide_one(row.id, each, reason) for row in pending]
    statuses = {r.status for r in results}
    status = (
        "decided" if statuses == {"decided"}
        else "recorded" if statuses <= {"decided", "recorded"}
        else next(r.status for r in results if r.status not in ("decided", "recorded"))
    )  # fmt: skip
    return DecisionResult(status, summary(pending, results, each))


def summary(rows: Sequence[Approval], results: Sequence[DecisionResult], each: Decision) -> str:
    """What the clicker is told: how many calls their answer decided, and what is left."""
    done = sum(1 for r in results if r.status in ("decided", "recorded"))
    verb = "Approved" if each == "approve" else "Rejected"
    parts = [f"{verb} {done} of {len(rows)} calls."]
    for row, result in zip(rows, results, strict=True):
        if result.status != "decided":  # a quorum's count, or why not
            parts.append(f"{row.tool_name}: {result.message}")
    return " ".join(parts)
