"""Approval cards: the view model built from the row, and `CardKeeper`, which posts and edits them.

Cards show exactly what would run: the row's arguments hide only known secrets (masked before
the row was written); values the redaction heuristic merely suspects are shown and listed in
`secret_looking`, so the approver sees them and knows to look twice.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Coroutine
from typing import Any, cast
from weakref import WeakValueDictionary

from cachetools import LRUCache

from bot.redaction import secret_looking
from bot.storage import approvals as approval_queries
from bot.storage.database import Database
from bot.storage.models import Approval
from bot.surfaces.base import (
    ApprovalCardView,
    ApprovalState,
    MessageRef,
    Risk,
    Surface,
    ThreadRef,
)

MAX_CARD_REFS = 10_000  # cards posted and not yet recorded or ended, at most

log = logging.getLogger(__name__)


def requesters_of(row: Approval) -> list[str]:
    """Everyone the approved call is made for (rows written before the list: the starter)."""
    return list(row.requesters) or ([row.requester] if row.requester else [])


def card_view(row: Approval, *, approvals_so_far: int | None = None) -> ApprovalCardView:
    """The card for an approval row."""
    so_far = len(row.decided_by) if approvals_so_far is None else approvals_so_far
    return ApprovalCardView(
        approval_id=row.id,
        tool_name=row.tool_name,
        connector=row.connector,
        action=row.action,
        risk=cast(Risk, row.risk if row.risk in ("low", "medium", "high") else "medium"),
        requester=row.requester,
        requesters=tuple(requesters_of(row)),
        reason=row.reason,
        arguments=json.dumps(
            row.arguments, indent=2, sort_keys=True, default=str, ensure_ascii=False
        ),
        secret_looking=tuple(secret_looking(row.arguments)),
        approvers=tuple(row.approvers),
        min_approvals=row.min_approvals,
        approvals_so_far=so_far if row.status in ("pending", "approved") else 0,
        state=cast(ApprovalState, row.status),
        decided_by=tuple(row.decided_by),
        decision_reason=row.decision_reason,
        expires_at=row.expires_at,
        grant_ttl_s=row.grant_ttl_s if row.grant_fingerprint else None,
        grant_vary=tuple(row.grant_vary),
    )


def card_ref(row: Approval) -> MessageRef | None:
    """Where the card of an approval lives, once it was posted."""
    if not row.card_message_id or not row.card_platform:
        return None
    thread = ThreadRef(
        row.card_platform, row.card_workspace or "", row.card_channel or "", row.card_root or ""
    )
    return MessageRef(thread, row.card_message_id)


def describe_outcome(row: Approval) -> str:
    """One sentence for a late clicker: what happened to this approval, and who decided."""
    who = ", ".join(row.decided_by)
    if row.status == "approved":
        return f"Already approved by {who}."
    if row.status == "rejected":
        reason = f": {row.decision_reason}" if row.decision_reason else "."
        return f"Already rejected by {who}{reason}"
    if row.status == "expired":
        return "This request expired without a decision."
    if row.status == "cancelled":
        return "This request was cancelled (the run stopped)."
    return "This request is still waiting for a decision."


class CardKeeper:
    """Where each approval's card lives, and its edits: one at a time per card (a lock lives only
    while some edit holds or waits for it), so a slow edit never lands after a later one."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._surfaces: dict[str, Surface] = {}
        # known at once, before the row says where; bounded (the row is the truth, this only
        # covers the moment between posting a card and recording it)
        self._refs: LRUCache[str, MessageRef] = LRUCache(maxsize=MAX_CARD_REFS)
        self._locks: WeakValueDictionary[str, asyncio.Lock] = WeakValueDictionary()
        self._posting: set[asyncio.Task[Approval]] = set()  # card posts outliving their run

    def register(self, surface: Surface) -> None:
        self._surfaces[surface.platform] = surface

    def surface(self, platform: str) -> Surface:
        surface = self._surfaces.get(platform)
        if surface is None:
            raise LookupError(f"no surface registered for platform {platform!r}")
        return surface

    def ref(self, row: Approval) -> MessageRef | None:
        return card_ref(row) or self._refs.get(row.id)

    def track(self, post: Coroutine[Any, Any, Approval]) -> asyncio.Task[Approval]:
        """Run a card post on a task of its own, kept until it ends (see `close`)."""
        task = asyncio.create_task(post)
        self._posting.add(task)
        task.add_done_callback(self._posting.discard)
        return task

    async def close(self) -> None:
        """Let card posts still in flight finish: a card that reached the chat is recorded, so
        the next process does not post it again."""
        await asyncio.gather(*self._posting, return_exceptions=True)

    async def post(self, approval: Approval, thread: ThreadRef) -> Approval:
        """Post the card and record where it lives; returns the row as it is now (raises when
        the card could not be posted)."""
        ref = await self.surface(thread.platform).post_approval_card(thread, card_view(approval))
        self._refs[approval.id] = ref
        card = {
            "card_platform": thread.platform,
            "card_workspace": thread.workspace,
            "card_channel": thread.channel,
            "card_root": thread.root,
            "card_message_id": ref.message_id,
        }
        fresh = await self._db.run(approval_queries.record_card, approval.id, **card)
        approval = fresh or approval
        if approval.status != "pending":  # decided while the card was being posted
            await self.update(approval)
        return approval

    async def update(self, row: Approval, *, view: ApprovalCardView | None = None) -> None:
        """Show the row's state (or `view`, a quorum's progress) on its card."""
        ref = self.ref(row)
        if row.status != "pending":
            self._refs.pop(row.id, None)
        surface = self._surfaces.get(ref.thread.platform) if ref else None
        if ref is None or surface is None:
            return
        lock = self._locks.setdefault(row.id, asyncio.Lock())
        try:
            async with lock:
                if row.status == "pending":  # a progress edit (quorum count): still current?
                    now = await self._db.run(approval_queries.get_approval, row.id)
                    if now is None or now.status != "pending":
                        return  # the outcome overtook it
                await surface.update_approval_card(ref, view or card_view(row))
        except Exception:  # noqa: BLE001 - the decision stands even if the card edit fails
            log.exception("updating the card of approval %s failed", row.id)
