"""The one live run of a conversation, as this process holds it: its task, its interrupts, who
may stop it, and letting it go when another process has taken it over."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from bot.chat.threads import ThreadRef
from bot.engine.interrupts import InterruptQueue
from bot.engine.stopping import StopSignal

log = logging.getLogger(__name__)


@dataclass(eq=False)
class ActiveRun:
    """The one live run of a conversation: its task and the queue its interrupts go into."""

    conversation_id: int
    thread: ThreadRef
    direct: bool = False
    run_id: str = ""
    interrupts: InterruptQueue = field(default_factory=InterruptQueue)
    queued: list[tuple[str, int | None]] = field(default_factory=list)  # (user, message id)
    not_history: set[int] = field(default_factory=set)  # message ids a follow-up run reads
    first_requesters: tuple[str, ...] = ()  # who asked a follow-up run (its query's authors)
    # the thread was made with its first run's mention: that run has no history to read
    new_thread: bool = False
    task: asyncio.Task[None] | None = None
    stop: StopSignal = field(default_factory=StopSignal)  # a person's Stop (`bot.runs.stopping`)
    # the run's requesters: everyone whose message it has read (they may stop it); a reply's
    # author joins when the engine drains the reply (`RunContext.on_read`), not on receipt
    people: set[str] = field(default_factory=set)
    # another process took the run over (this one's lease lapsed): the task ends, the run not
    lost: bool = False

    def begin(self, run_id: str, *people: str) -> None:
        """A (new) run of this conversation starts: a fresh stop signal, its requesters."""
        self.run_id, self.stop = run_id, StopSignal()
        self.people = {p for p in people if p}

    def read_through(self, floor: int | None) -> int | None:
        """The newest stored reply the engine has read (`floor`: what was read before), for
        the checkpoint: a run resumed from it reads every reply after this one again. The
        unread replies are the queue's newest (`queued`'s tail, as long as `interrupts`)."""
        read = [i for _, i in self.queued[: len(self.queued) - len(self.interrupts)] if i]
        if floor is not None:
            read.append(floor)
        return max(read, default=None)

    def queue_replies(self, replies: list[tuple[str, str, int | None]]) -> None:
        """Stored replies the run is to read, oldest first (`(author, text, message id)`):
        mail from another process, or replies it never read before its process stopped. One
        already in the queue (by message id) is not queued twice."""
        known = self.queued_ids()
        for author, text, message_id in replies:
            if message_id and message_id in known:
                continue
            self.interrupts.put(text, author=author)
            self.queued.append((author, message_id))

    def queued_ids(self) -> set[int]:
        """The stored replies already in this run's queue (read or not)."""
        return {message_id for _, message_id in self.queued if message_id}


def lose(active: ActiveRun, why: str) -> None:
    """Another process holds the run's lease: this task stops without ending the run."""
    if active.lost:
        return
    log.warning("%s; this process lets it go", why)
    active.lost = True
    if active.task is not None:
        active.task.cancel()
