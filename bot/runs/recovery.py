"""Recovery: what a gone process left unfinished, taken over after the server listens.

At start-up, and then at every heartbeat (or at once when another process says it let its runs
go), this looks for runs and inbound events whose process is gone (`bot.runs.leases`: its lease
lapsed, or its pid is gone from this host) and takes each over with a conditional UPDATE, so
one process adopts it. A live lease is never taken. `running` and `waiting_approval` runs are
continued from their checkpoint (`RunManager.adopt`: the status message goes on where it was;
a tool call that was in flight is never re-run, the call log says whether it finished).
`answering` runs had their answer stored and were posting it: the answer is posted (again, if
the stop came after it was sent, with a note saying so), never replaced by a failure notice.
A run someone stopped, or one that cannot be continued, is ended and its thread told. Inbound
events that were acknowledged but not yet processed are handed to this process's workers.

Start-up recovery runs in the background: `chatops serve` listens first and `/healthz`
answers at once (saying `recovering`). Adopted threads are claimed and the inbox taken over
before new messages are dispatched, so a reply never overtakes the run it belongs to; the slow
part (editing status messages and posting notices at the platform's rate limit) runs a bounded
number of threads at a time.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import NamedTuple

from bot.approvals.broker import ApprovalBroker
from bot.chat.threads import MessageRef, ThreadRef
from bot.chat.views import StatusView
from bot.engine.artifacts import artifacts_of
from bot.runs.answering import answer_files
from bot.runs.endings import ANSWERING
from bot.runs.manager import RunManager
from bot.statuses import RunStatus
from bot.storage import queries as queries
from bot.storage.database import OUTAGE_RETRY_S, Database
from bot.storage.models import Conversation, Run

log = logging.getLogger(__name__)

INTERRUPTED = "interrupted: the bot stopped while this run was working"
RESTART_NOTICE = (
    "The bot restarted while it was working on this, so that run was stopped. "
    "Some steps may have run; ask again to continue."
)
RECOVERY_CONCURRENCY = 8  # threads recovered at once: each edits and posts at the rate limit
REPOSTED_NOTE = "_(Posted after a restart: the bot stopped while posting this answer.)_"
ANSWER_POLL_S = 0.5  # how often an adopter looks for the answer a live owner may still record


class Leftover(NamedTuple):
    """A run taken over to be finished or failed, not continued; `owner_may_live`: its
    previous owner may still be working (then it may be posting the answer right now)."""

    run: Run
    conv: Conversation
    owner_may_live: bool


class Recovery:
    """One start-up's recovery, owned by the runtime: `start()` it, `close()` it."""

    def __init__(
        self,
        *,
        db: Database,
        run_manager: RunManager,
        broker: ApprovalBroker,
        adopt_inbox: Callable[[set[str]], Awaitable[int]] | None = None,
        concurrency: int = RECOVERY_CONCURRENCY,
    ) -> None:
        """`adopt_inbox(gone owners)`: take over unprocessed inbound events of gone processes
        and hand them to this process's workers (returns how many); `concurrency`: threads
        recovered at once (each edits and posts messages)."""
        self._db = db
        self._runs = run_manager
        self._leases = run_manager.leases
        self._broker = broker
        self._adopt_inbox = adopt_inbox
        self._limit = asyncio.Semaphore(concurrency)
        self._task: asyncio.Task[None] | None = None
        self._kicked = asyncio.Event()
        self._finishing: set[asyncio.Task[None]] = set()
        self.done = asyncio.Event()

    @property
    def recovering(self) -> bool:
        return self._task is not None and not self.done.is_set()

    def start(self) -> None:
        self._runs.hold_dispatch()
        self._task = asyncio.create_task(self._recover(), name="recovery")

    def kick(self) -> None:
        """Look for the runs and events of gone processes soon (a heartbeat, a wake-up)."""
        self._kicked.set()

    async def close(self) -> None:
        for task in (self._task, *self._finishing):
            if task is not None and not task.done():
                task.cancel()
        await asyncio.gather(
            *(t for t in (self._task, *self._finishing) if t is not None), return_exceptions=True
        )

    async def wait(self, timeout: float) -> None:  # noqa: ASYNC109 - like RunManager.wait_idle
        await asyncio.wait_for(self.done.wait(), timeout)

    async def _recover(self) -> None:
        try:
            rest = await self._take_over(first=True)
            await asyncio.gather(*(self._bounded(left) for left in rest))
            log.info("recovery done: %d interrupted runs finished or failed", len(rest))
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - recovery failing must not keep new messages waiting
            log.exception("start-up recovery failed")
        finally:
            self._runs.mark_ready()
            self.done.set()
        while True:  # then: whenever a heartbeat or another process asks
            await self._kicked.wait()
            self._kicked.clear()
            try:
                rest = await self._take_over(first=False)
            except Exception:  # noqa: BLE001 - the next heartbeat looks again
                log.exception("taking over the work of a gone process failed")
                continue
            for left in rest:  # finished in the background: the scans go on meanwhile
                task = asyncio.create_task(self._bounded(left), name=f"finish {left.run.id}")
                self._finishing.add(task)
                task.add_done_callback(self._finishing.discard)

    async def _take_over(self, *, first: bool) -> list[Leftover]:
        """Claim what gone processes left: adopt the runs that can go on, hand the inbox to
        the workers; the runs to finish or fail come back. (`first`: start-up, when new
        messages wait for this.)"""
        if first:
            await self._leases.forget_long_gone()
        dead = await self._leases.dead_owners()
        # a run on a platform this process has no surface for is left to one that has: here
        # its thread could be told nothing, and a live process serving it would adopt it
        candidates = await self._leases.adoptable(dead, self._runs.surfaces().keys())
        rest: list[Leftover] = []
        adopted = 0
        for run, conv in candidates:
            owner_may_live = self._leases.may_still_run(run.owner)
            if not await self._leases.claim(run, dead):
                continue  # another process took it, or its owner renewed the lease
            # a run someone stopped is never continued (its stop was acknowledged)
            live = run.status in queries.LIVE_RUN_STATES and not run.stopped_by
            if live and await self._runs.adopt(run, conv):
                adopted += 1
            else:
                rest.append(Leftover(run, conv, owner_may_live))
        requeued = await self._adopt_inbox(dead) if self._adopt_inbox is not None else 0
        if first:
            self._runs.mark_ready()
        if adopted or rest or requeued:
            log.info(
                "recovering: %d runs adopted, %d to finish or fail, %d inbound events requeued",
                adopted,
                len(rest),
                requeued,
            )
        return rest

    async def _bounded(self, left: Leftover) -> None:
        run, conv = left.run, left.conv
        async with self._limit:
            thread = ThreadRef(conv.platform, conv.workspace, conv.channel, conv.root)
            try:
                if run.status == ANSWERING:
                    await self._post_stored_answer(run, thread, left.owner_may_live)
                else:
                    await self._fail(run, thread)
            except Exception:  # noqa: BLE001 - one thread that cannot be told must not stop the rest
                log.exception("recovering run %s in %s failed", run.id, thread)

    async def _fail(self, run: Run, thread: ThreadRef) -> None:
        """Fail a run the stop interrupted, if it is still live; only then tell its thread."""
        await self._broker.cancel_run(run.id)  # a card left pending would wait for nothing
        by = run.stopped_by
        outcome = RunStatus.CANCELLED if by else RunStatus.FAILED
        won = await self._db.run(
            queries.finish_run,
            run.id,
            None,
            status=outcome,
            current=(run.status,),
            fence=self._leases.fence(run),
            error=f"stopped by {by}" if by else INTERRUPTED,
        )
        if won:
            self._runs.metrics.run_ended(outcome, (thread.platform, thread.workspace))
        surface = self._runs.surfaces().get(thread.platform)
        if won:  # replies sent to it from other processes start the thread's next run
            await self._runs.take_over_mail(run.id)
        if not won or surface is None:
            return
        if run.status_message_id:
            view = StatusView(state=RunStatus.FAILED, headline="Stopped: the bot restarted mid-run")
            if by:  # the stop was acknowledged before the bot stopped: it stands
                view = StatusView(state=RunStatus.CANCELLED, headline="Stopped")
            await surface.update_status(MessageRef(thread, run.status_message_id), view)
        if by:
            await surface.post_notice(thread, "stopped this run.", mention=(by,))
        else:
            await surface.post_notice(thread, RESTART_NOTICE)

    async def _post_stored_answer(self, run: Run, thread: ThreadRef, owner_may_live: bool) -> None:
        """The stop came while the answer was being posted: post it, then end the run done."""
        surface = self._runs.surfaces().get(thread.platform)
        if surface is None or run.answer is None:
            return
        # the owner records the answer's message once it posted it: then it is not posted again
        # (an owner that may still live lost the run while posting, say across a database
        # outage: it records the message at its next try, one outage pause and a lease away)
        wait_s = OUTAGE_RETRY_S[-1] + self._leases.lease_s if owner_may_live else 0.0
        if not await self._answer_recorded(run.id, wait_s):
            files = answer_files(artifacts_of(run.checkpoint))  # the documents go along again
            await surface.post_answer(thread, f"{run.answer}\n\n{REPOSTED_NOTE}", files=files)
        reply = queries.new_message(
            conversation_id=run.conversation_id, role="assistant", text=run.answer
        )
        if await self._db.run(
            queries.finish_run, run.id, reply, status=RunStatus.DONE, current=(ANSWERING,),
            fence=self._leases.fence(run),
        ):  # fmt: skip
            self._runs.metrics.run_ended(RunStatus.DONE, (thread.platform, thread.workspace))
        await self._runs.take_over_mail(run.id)
        if run.status_message_id:
            view = StatusView(state=RunStatus.DONE, headline="Done")
            await surface.update_status(MessageRef(thread, run.status_message_id), view)

    async def _answer_recorded(self, run_id: str, wait_s: float) -> bool:
        """Whether the answer's message is recorded, looking again for up to `wait_s` while
        keeping this process's lease on the run (no third process takes it meanwhile)."""
        loop = asyncio.get_running_loop()
        renew_at = loop.time()
        until = renew_at + wait_s
        while True:
            stored = await self._db.run(queries.get_run, run_id)
            if stored is not None and stored.answer_message_id is not None:
                return True
            if loop.time() >= until:
                return False
            await asyncio.sleep(ANSWER_POLL_S)
            if loop.time() >= renew_at:  # at the heartbeat's pace, not every look
                await self._leases.renew([run_id])
                renew_at = loop.time() + self._leases.beat_interval_s
