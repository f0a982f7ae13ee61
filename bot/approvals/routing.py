"""Where an approval's card goes (`route`), and `CardKeeper`, which posts and edits its copies.

`route: thread` (the default) posts the card in the requesting thread. `channel:<id>` posts it
in that approvals channel (the copy links back to the thread) and leaves a notice in the
thread; `dm` sends a copy to each approver's direct messages (nobody listed: the thread, as
there is nobody to send it to). Every copy is recorded (`approval_card`) as soon as it is
posted, so a click on any copy is recognised and a decision edits all of them, also after a
restart. Edits of one approval go one at a time (a lock lives only while some edit holds or
waits for it), so a slow edit never lands after a later one.

The calls of one model response share a batch (`bot.approvals.batches`): on the thread route
the first of them posts the card and records it on every call it lists, in one transaction (so a
click, in any process, finds all of them on the card or none yet: "Approve all" decides exactly
what the card showed); the others are recorded on the same message; every change
of any of them edits that one card, read again from the database each time (one lock per
batch), so it always shows every call as it stands, in this process or after a restart.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Coroutine, Sequence
from typing import Any
from weakref import WeakValueDictionary

from cachetools import LRUCache

from bot.approvals.authority import Approvers, ApproversOf, on_one_of
from bot.approvals.batches import batch_view, grouped
from bot.approvals.cards import card_ref, card_view
from bot.chat.decisions import CardClick
from bot.chat.surface import Surface
from bot.chat.threads import MessageRef, ThreadRef
from bot.chat.views import AnyCardView, ApprovalCardView, CardPlace
from bot.chat.waiting import InboxShower
from bot.statuses import ApprovalStatus
from bot.storage import approval_queries
from bot.storage.approval_batches import batch_members
from bot.storage.database import Database
from bot.storage.models import Approval, ApprovalCard

MAX_CARD_REFS = 10_000  # cards posted and not yet recorded or ended, at most
# how long a click waits for its card to be recorded by the process that posted it
CARD_RECORD_WAIT_S = 5.0
CARD_RECORD_POLL_S = 0.05
BATCH_EDIT_ROUNDS = 3  # a batch card edited, read again, edited again if it moved on, at most

log = logging.getLogger(__name__)


def route_places(route: str, thread: ThreadRef, dm_users: Sequence[str]) -> list[CardPlace]:
    """The places a route sends copies to; empty: the card goes in the thread."""
    if route.startswith("channel:") and route[len("channel:") :]:
        return [CardPlace("channel", thread.workspace, route[len("channel:") :])]
    if route == "dm":
        return [CardPlace("dm", thread.workspace, user) for user in dm_users]
    return []


def copy_ref(copy: ApprovalCard) -> MessageRef:
    return MessageRef(
        ThreadRef(copy.platform, copy.workspace, copy.channel, copy.root), copy.message_id
    )


class CardKeeper:
    """Posts an approval's card where its route says, and edits every copy (see the module)."""

    def __init__(self, db: Database, *, approvers_of: ApproversOf | None = None) -> None:
        """`approvers_of`: who may decide in an approval's workspace (groups resolved, its
        approvers narrowing the row's): whose inboxes a change of it may change (none: every
        inbox on show)."""
        self._db = db
        self._approvers_of = approvers_of
        self._surfaces: dict[str, Surface] = {}
        # copies known at once, before the database says where (the first one also in the
        # row); bounded: the database is the truth, this covers the moment between posting a
        # copy and recording it
        self._refs: LRUCache[str, list[tuple[MessageRef, str]]] = LRUCache(MAX_CARD_REFS)
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
        """The first copy of the card (the one in the thread on the default route)."""
        return card_ref(row) or next((ref for ref, _ in self._refs.get(row.id, ())), None)

    def refs(self, row: Approval, copies: Sequence[ApprovalCard]) -> list[MessageRef]:
        """Every copy of the card: the recorded ones and those posted but not yet recorded."""
        return list(self._targets(row, copies))

    def _targets(self, row: Approval, copies: Sequence[ApprovalCard]) -> dict[MessageRef, str]:
        """Every copy of the card and the thread link it shows."""
        first = card_ref(row)
        targets = {first: ""} if first is not None else {}
        targets.update(self._refs.get(row.id, ()))
        targets.update((copy_ref(copy), copy.link) for copy in copies)
        return targets

    async def once_recorded(
        self, row: Approval, copies: Sequence[ApprovalCard], click: CardClick
    ) -> tuple[Approval, Sequence[ApprovalCard]]:
        """The row and its copies once the clicked card is known, or can no longer become so.

        Only the process that posts a card knows where it is before recording it; a click that
        reaches another process first (several processes) would be refused as not on this
        card. While the approval is pending, its card unrecorded and the click not on a known
        copy, this reads the row again, for at most `CARD_RECORD_WAIT_S`.
        """
        deadline = asyncio.get_running_loop().time() + CARD_RECORD_WAIT_S
        while row.status == ApprovalStatus.PENDING and row.card_message_id is None:
            if on_one_of(self.refs(row, copies), click):
                break
            if asyncio.get_running_loop().time() > deadline:
                break
            await asyncio.sleep(CARD_RECORD_POLL_S)
            fresh, copies = await self._db.run(approval_queries.approval_with_copies, row.id)
            row = fresh or row
        return row, copies

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

    async def post(
        self, approval: Approval, thread: ThreadRef, dm_users: Sequence[str]
    ) -> Approval:
        """Post the card where the route says and record each copy; returns the row as it is
        now (raises when no copy could be posted: nobody could answer it)."""
        surface = self.surface(thread.platform)
        places = route_places(approval.route, thread, dm_users)
        if not places and approval.batch_id:
            approval = await self._post_in_batch(approval, thread)
        elif not places:
            ref = await surface.post_approval_card(thread, card_view(approval))
            approval = await self._record(approval, ref, "thread", primary=True)
        else:
            link = ""
            try:
                link = await surface.thread_link(thread)
            except Exception:  # noqa: BLE001 - a copy without its link still asks the right people
                log.warning("no link to the thread of approval %s", approval.id, exc_info=True)
            approval = await self._post_copies(approval, places, link, primary=True)
            try:
                await surface.post_routed_notice(thread, places)
            except Exception:  # noqa: BLE001 - the card is out; the thread's note is a courtesy
                log.exception("the routing notice of approval %s failed", approval.id)
        if approval.status != ApprovalStatus.PENDING:  # decided while the card was being posted
            await self.update(approval)
        else:
            await self.refresh_inboxes(approval)
        return approval

    async def _post_in_batch(self, approval: Approval, thread: ThreadRef) -> Approval:
        """The batch's one card: posted by the first of its calls (listing every call asked by
        then, each recorded on it), joined by the others (recorded, then the card edited)."""
        surface = self.surface(thread.platform)
        lock = self._locks.setdefault(_batch_key(approval.batch_id), asyncio.Lock())
        async with lock:
            members = await self._db.run(batch_members, approval.batch_id)
            mine = next((row for row, _ in members if row.id == approval.id), approval)
            if card_ref(mine) is not None:  # recorded when the card was posted
                return mine
            refs = [card_ref(row) for row, _ in members]
            posted = next((ref for ref in refs if ref is not None), None)
            if posted is None:
                shown = [(row, n) for row, n in members if row.status == ApprovalStatus.PENDING]
                shown = shown or [(approval, 0)]
                view = self._batch_view(shown) if grouped(shown) else card_view(approval)
                ref = await surface.post_approval_card(thread, view)
                recorded = await self._record_batch([row for row, _ in shown], ref)
                return next((row for row in recorded if row.id == approval.id), approval)
            approval = await self._record(approval, posted, "thread", primary=True)
            await self._edit_batch(approval.batch_id, posted)
        return approval

    def _batch_view(self, members: Sequence[tuple[Approval, int]]) -> AnyCardView:
        return batch_view(members, self._approvers_of or (lambda row: Approvers({})))

    async def _edit_batch(self, batch_id: str, ref: MessageRef) -> bool:
        """Show the batch as it stands on its card (the caller holds the batch's lock); False
        when the card at `ref` lists fewer than two calls (it is an ordinary card).

        Another process may edit the same card at the same moment (a click there), and the
        platform keeps whichever edit lands last, which can be the older view. So after its
        edit, a process reads the batch again and edits once more if it has moved on: the
        last edit to land is then always followed by a look at what is stored."""
        shown: AnyCardView | None = None
        for _ in range(BATCH_EDIT_ROUNDS):
            members = [
                (row, n)
                for row, n in await self._db.run(batch_members, batch_id)
                if card_ref(row) == ref
            ]
            if not grouped(members):
                return shown is not None
            view = self._batch_view(members)
            if view == shown:
                return True
            surface = self._surfaces.get(ref.thread.platform)
            if surface is None:
                return True
            try:
                await surface.update_approval_card(ref, view)
            except Exception:  # noqa: BLE001 - the decision stands even if an edit fails
                log.exception("updating the card of batch %s failed", batch_id)
                return True
            shown = view
        return True

    async def refresh_inboxes(self, row: Approval) -> None:
        """The approval was asked, answered or ended: the inboxes it is (or was) in are shown
        again (its approvers and who answered; everyone's when anyone may decide it)."""
        surface = self._surfaces.get(row.card_platform or "")
        if not isinstance(surface, InboxShower):
            return
        users: list[str] | None = None
        deciders = self._approvers_of(row).deciders(row.approvers) if self._approvers_of else None
        if deciders is not None:
            users = sorted(deciders | set(row.decided_by))
        try:
            await surface.refresh_inbox(users, workspace=row.card_workspace or "")
        except Exception:  # noqa: BLE001 - an inbox not refreshed must not undo a decision
            log.exception("refreshing the inboxes of approval %s failed", row.id)

    async def add_dm_copies(self, row: Approval, users: Sequence[str]) -> None:
        """Copies for people added by an escalation tier who have none yet (route `dm`)."""
        copies = await self._db.run(approval_queries.card_copies, row.id)
        have = {c.user_id for c in copies if c.kind == "dm"}
        if not row.card_platform or not copies:
            return
        workspace, link = copies[0].workspace, copies[0].link
        places = [CardPlace("dm", workspace, u) for u in users if u not in have]
        if places:
            await self._post_copies(row, places, link, primary=False)

    def has_direct_messages(self, platform: str) -> bool:
        """Can this platform's cards be sent to one person (Slack, Feishu; not the console)?"""
        surface = self._surfaces.get(platform)
        return surface is not None and surface.direct_messages

    async def post_reminder(self, row: Approval, user: str, note: str) -> None:
        """A copy of the card in `user`'s direct messages with `note` (a reminder) on top,
        recorded like every copy: its buttons decide, and the decision edits it."""
        surface = self.surface(row.card_platform or "")
        copies = await self._db.run(approval_queries.card_copies, row.id)
        link = next((c.link for c in copies if c.link), "")
        if not link and row.card_channel:
            thread = ThreadRef(surface.platform, row.card_workspace or "", row.card_channel,
                               row.card_root or row.card_message_id or "")  # fmt: skip
            try:
                link = await surface.thread_link(thread)
            except Exception:  # noqa: BLE001 - the reminder still asks the right person
                log.warning("no link to the thread of approval %s", row.id, exc_info=True)
        view = card_view(row, link=link)
        view = dataclasses.replace(view, notes=(note, *view.notes))
        workspace = row.card_workspace or (copies[0].workspace if copies else "")
        place = CardPlace("dm", workspace, user)

        async def post_and_record() -> None:
            ref = await surface.post_approval_copy(place, view)
            await self._record(row, ref, "reminder", user=user, link=link, primary=False)

        # a stop meanwhile does not part a posted copy from its record: unrecorded, the
        # copy's buttons would stay live-looking after the approval ends (no edit finds it)
        await asyncio.shield(asyncio.ensure_future(post_and_record()))

    async def post_near_copies(self, row: Approval, text: str, *, mention: Sequence[str]) -> None:
        """A notice next to every copy people read together: the thread's copy in its thread,
        an approvals channel's copy as a reply to it (DM copies speak for themselves)."""
        copies = await self._db.run(approval_queries.card_copies, row.id)
        for copy in copies:
            if copy.kind in ("dm", "reminder"):
                continue
            ref = copy_ref(copy)
            where = (
                ref.thread
                if copy.kind == "thread"
                else dataclasses.replace(ref.thread, root=copy.message_id)
            )
            try:
                await self.surface(copy.platform).post_notice(where, text, mention=mention)
            except Exception:  # noqa: BLE001 - one lost notice must not stop the others
                log.exception("a notice next to a card of approval %s failed", row.id)

    async def _post_copies(
        self, approval: Approval, places: Sequence[CardPlace], link: str, *, primary: bool
    ) -> Approval:
        surface = self.surface(approval.card_platform or "")
        posted = 0
        for place in places:
            try:
                ref = await surface.post_approval_copy(place, card_view(approval, link=link))
            except Exception:  # noqa: BLE001 - the other approvers still get theirs
                log.exception("a copy of approval %s's card (%s) failed", approval.id, place)
                continue
            user = place.target if place.kind == "dm" else ""
            first = primary and posted == 0
            approval = await self._record(approval, ref, place.kind, user=user, link=link,
                                          primary=first)  # fmt: skip
            posted += 1
        if primary and posted == 0:
            raise LookupError(f"no copy of approval {approval.id}'s card could be posted")
        return approval

    async def _record(
        self,
        approval: Approval,
        ref: MessageRef,
        kind: str,
        *,
        user: str = "",
        link: str = "",
        primary: bool,
    ) -> Approval:
        self._refs[approval.id] = [*self._refs.get(approval.id, ()), (ref, link)]
        thread = ref.thread
        copy = ApprovalCard(approval_id=approval.id, platform=thread.platform,
                            workspace=thread.workspace, channel=thread.channel, root=thread.root,
                            message_id=ref.message_id, kind=kind, user_id=user,
                            link=link)  # fmt: skip
        fresh = await self._db.run(approval_queries.add_card_copy, copy, primary=primary)
        return fresh or approval

    async def _record_batch(self, rows: Sequence[Approval], ref: MessageRef) -> list[Approval]:
        """Record the batch card on every call it shows, in one transaction: a click (in any
        process) sees all of them on the card or none yet, never a part (see `BatchDesk`)."""
        for row in rows:
            self._refs[row.id] = [*self._refs.get(row.id, ()), (ref, "")]
        thread = ref.thread
        copies = [ApprovalCard(approval_id=row.id, platform=thread.platform,
                               workspace=thread.workspace, channel=thread.channel,
                               root=thread.root, message_id=ref.message_id, kind="thread")
                  for row in rows]  # fmt: skip
        fresh = await self._db.run(approval_queries.add_card_copies, copies)
        return [now or row for now, row in zip(fresh, rows, strict=True)]

    async def update(self, row: Approval, *, view: ApprovalCardView | None = None) -> None:
        """Show the row's state (or `view`, a quorum's progress) on every copy of its card."""
        copies = await self._db.run(approval_queries.card_copies, row.id)
        targets = self._targets(row, copies)
        if row.status != ApprovalStatus.PENDING:
            self._refs.pop(row.id, None)
        shared = card_ref(row) if row.batch_id else None
        if shared is not None:  # the batch's card shows every call of it, as they stand
            async with self._locks.setdefault(_batch_key(row.batch_id), asyncio.Lock()):
                if await self._edit_batch(row.batch_id, shared):
                    targets.pop(shared, None)
        if not targets:
            await self.refresh_inboxes(row)
            return
        shown = view or card_view(row)
        lock = self._locks.setdefault(row.id, asyncio.Lock())
        async with lock:
            # a progress edit (quorum count): still current?
            if row.status == ApprovalStatus.PENDING:
                now = await self._db.run(approval_queries.get_approval, row.id)
                if now is None or now.status != ApprovalStatus.PENDING:
                    return  # the outcome overtook it
            for ref, link in targets.items():
                surface = self._surfaces.get(ref.thread.platform)
                if surface is None:
                    continue
                try:
                    await surface.update_approval_card(
                        ref, dataclasses.replace(shown, thread_link=link)
                    )
                except Exception:  # noqa: BLE001 - the decision stands even if an edit fails
                    log.exception("updating a card of approval %s failed", row.id)
        await self.refresh_inboxes(row)


def _batch_key(batch_id: str) -> str:
    """A batch's lock, apart from any approval's (approval ids are hex: no colon)."""
    return f"batch:{batch_id}"
