"""Replies that crossed processes: `run_mail` for a run another process owns.

A reply that reaches a process other than the owner of its thread's run is stored as mail for
that run (in the same transaction as the message), and the owner is woken; the owner takes the
mail into the run's interrupts, as if the reply had reached it. Mail of a run that ended before
anyone took it is taken back and starts the thread's next run here, like replies left over at
the end of a run. Each piece of mail has one taker (`lease_queries.take_mail`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from bot.runs.active import ActiveRun
from bot.runs.leases import LeaseKeeper
from bot.storage import leases as lease_queries
from bot.storage import queries as queries
from bot.storage.database import Database
from bot.storage.models import Conversation, RunMail
from bot.storage.wakeups import Wakeup, Wakeups


class RunSlots(Protocol):
    """What the post office needs of the run manager: its active runs, and starting one."""

    def active_runs(self) -> list[ActiveRun]: ...

    def active_in(self, conversation_id: int) -> ActiveRun | None: ...

    def claim(self, conv: Conversation) -> ActiveRun:
        """Register a new active run for the conversation (no await before it is claimed)."""
        ...

    async def release(self, active: ActiveRun) -> None: ...

    async def start_next(self, active: ActiveRun) -> None:
        """Start the run its delivered mail asks for (released again if that fails)."""
        ...


class PostOffice:
    """Forwards replies to the process owning their run, and takes this process's mail."""

    def __init__(
        self, db: Database, leases: LeaseKeeper, wakeups: Wakeups, slots: RunSlots
    ) -> None:
        self._db = db
        self._leases = leases
        self._wakeups = wakeups
        self._slots = slots

    async def forward(self, placeholder: ActiveRun, mail: RunMail) -> None:
        """The reply is mail for a run another process owns: wake that process. Replies this
        process took for the thread meanwhile go the same way. If the run ended before its
        owner took the mail, the mail is taken back and starts a run here."""
        extra = placeholder.interrupts.drain()
        await self._slots.release(placeholder)
        for item, (_, message_id) in zip(extra, placeholder.queued, strict=False):
            more = RunMail(
                run_id=mail.run_id, message_id=message_id or 0, author=item.author,
                text=item.text,
            )  # fmt: skip
            await self._db.run(lease_queries.add_mail, more)
        await self._wakeups.send(Wakeup("mail", run_id=mail.run_id, sender=self._leases.me))
        if not await self._db.run(lease_queries.run_is_unfinished, mail.run_id):
            await self.take_over(mail.run_id)

    async def take_over(self, run_id: str) -> None:
        """The run ended before anyone took its mail: take it, and start the thread's next
        run with it here."""
        mail = await self._db.run(lease_queries.take_mail, [run_id], self._leases.me)
        await self._redispatch(mail)

    async def take(self, run_ids: list[str] | None = None) -> int:
        """Take the mail of this process's runs (all, or `run_ids`) into their interrupts."""
        by_run = {a.run_id: a for a in self._slots.active_runs() if a.run_id and not a.lost}
        ids = [r for r in (run_ids if run_ids is not None else by_run) if r in by_run]
        if not ids:
            return 0
        mail: list[RunMail] = await self._db.run(lease_queries.take_mail, ids, self._leases.me)
        for item in mail:
            active = by_run.get(item.run_id)
            if active is not None and active.run_id == item.run_id:
                deliver_mail(active, [item])
            else:  # the run ended between the lookup and the take: the thread's next run
                await self._redispatch([item])
        return len(mail)

    async def _redispatch(self, mail: list[RunMail]) -> None:
        """Mail of a run that ended before anyone took it: the thread's run here reads it, or
        it starts the thread's next run."""
        if not mail:
            return
        run = await self._db.run(queries.get_run, mail[0].run_id)
        conv = await self._db.run(queries.get_conversation, run.conversation_id) if run else None
        if conv is None or conv.id is None:
            return
        active = self._slots.active_in(conv.id)
        if active is not None:  # a run of the thread is here already: it reads them
            deliver_mail(active, mail)
            return
        active = self._slots.claim(conv)
        deliver_mail(active, mail)
        await self._slots.start_next(active)


def deliver_mail(active: ActiveRun, mail: Sequence[RunMail]) -> None:
    """Taken mail becomes the run's interrupts, as a reply received here would (its author
    may stop the run once the engine has read it: `RunContext.on_read`)."""
    # a resumed run may have queued its stored replies already: those are not read twice
    active.queue_replies([(item.author, item.text, item.message_id or None) for item in mail])
