"""Start-up recovery: what a stopped process left unfinished, done after the server listens.

A crash leaves runs in three states. `waiting_approval` runs are resumed from their checkpoint
(their card stays; a click continues them). `answering` runs had their answer stored and were
posting it: the answer is posted (again, if the stop came after it was sent, with a note
saying so), never replaced by a failure notice. `running` runs were mid-step and are failed,
their thread told. Inbound events that were acknowledged but not yet processed are handed
back to the inbox workers.

Recovery runs in the background: `chatops serve` listens first and `/healthz` answers at once
(saying `recovering`). Resumed threads are claimed and the unprocessed inbox re-queued before
new messages are dispatched, so a reply never overtakes the run it belongs to; the slow part
(editing status messages and posting notices at the platform's rate limit) runs a bounded
number of threads at a time.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from bot.approvals.broker import ApprovalBroker
from bot.engine.artifacts import artifacts_of
from bot.runs.manager import RunManager
from bot.runs.runner import ANSWERING
from bot.runs.types import answer_files
from bot.storage import queries as queries
from bot.storage.database import Database
from bot.storage.models import Conversation, Run
from bot.surfaces.base import MessageRef, StatusView, ThreadRef

log = logging.getLogger(__name__)

INTERRUPTED = "interrupted: the bot stopped while this run was working"
RESTART_NOTICE = (
    "The bot restarted while it was working on this, so that run was stopped. "
    "Some steps may have run; ask again to continue."
)
REPOSTED_NOTE = "_(Posted after a restart: the bot stopped while posting this answer.)_"


class Recovery:
    """One start-up's recovery, owned by the runtime: `start()` it, `close()` it."""

    def __init__(
        self,
        *,
        db: Database,
        run_manager: RunManager,
        broker: ApprovalBroker,
        requeue_inbox: Callable[[], Awaitable[int]] | None = None,
        concurrency: int = 8,
    ) -> None:
        """`requeue_inbox()`: hand unprocessed inbound events back to their workers (returns
        how many); `concurrency`: threads recovered at once (each edits and posts messages)."""
        self._db = db
        self._runs = run_manager
        self._broker = broker
        self._requeue_inbox = requeue_inbox
        self._limit = asyncio.Semaphore(concurrency)
        self._task: asyncio.Task[None] | None = None
        self.done = asyncio.Event()

    @property
    def recovering(self) -> bool:
        return self._task is not None and not self.done.is_set()

    def start(self) -> None:
        self._runs.hold_dispatch()
        self._task = asyncio.create_task(self._recover(), name="recovery")

    async def close(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)

    async def wait(self, timeout: float) -> None:  # noqa: ASYNC109 - like RunManager.wait_idle
        await asyncio.wait_for(self.done.wait(), timeout)

    async def _recover(self) -> None:
        try:
            await self._recover_all()
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - recovery failing must not keep new messages waiting
            log.exception("start-up recovery failed")
        finally:
            self._runs.mark_ready()
            self.done.set()

    async def _recover_all(self) -> None:
        unfinished = await self._db.run(
            queries.runs_with_status, "running", "waiting_approval", ANSWERING
        )
        rest: list[tuple[Run, Conversation]] = []
        resumed = 0
        for run, conv in unfinished:  # no await: claimed before any new message is dispatched
            if run.status == "waiting_approval" and self._runs.resume(run, conv):
                resumed += 1
            else:
                rest.append((run, conv))
        requeued = await self._requeue_inbox() if self._requeue_inbox is not None else 0
        self._runs.mark_ready()
        if unfinished or requeued:
            log.info(
                "recovering: %d runs resumed, %d to finish or fail, %d inbound events requeued",
                resumed,
                len(rest),
                requeued,
            )
        await asyncio.gather(*(self._bounded(run, conv) for run, conv in rest))
        log.info("recovery done: %d interrupted runs finished or failed", len(rest))

    async def _bounded(self, run: Run, conv: Conversation) -> None:
        async with self._limit:
            thread = ThreadRef(conv.platform, conv.workspace, conv.channel, conv.root)
            try:
                if run.status == ANSWERING:
                    await self._post_stored_answer(run, thread)
                else:
                    await self._fail(run, thread)
            except Exception:  # noqa: BLE001 - one thread that cannot be told must not stop the rest
                log.exception("recovering run %s in %s failed", run.id, thread)

    async def _fail(self, run: Run, thread: ThreadRef) -> None:
        """Fail a run the stop interrupted, if it is still live; only then tell its thread."""
        await self._broker.cancel_run(run.id)  # a card left pending would wait for nothing
        won = await self._db.run(
            queries.finish_run,
            run.id,
            None,
            status="failed",
            current=(run.status,),
            error=INTERRUPTED,
        )
        surface = self._runs.surfaces().get(thread.platform)
        if not won or surface is None:
            return
        if run.status_message_id:
            view = StatusView(state="failed", headline="Stopped: the bot restarted mid-run")
            await surface.update_status(MessageRef(thread, run.status_message_id), view)
        await surface.post_notice(thread, RESTART_NOTICE)

    async def _post_stored_answer(self, run: Run, thread: ThreadRef) -> None:
        """The stop came while the answer was being posted: post it, then end the run done."""
        surface = self._runs.surfaces().get(thread.platform)
        if surface is None or run.answer is None:
            return
        files = answer_files(artifacts_of(run.checkpoint))  # the documents go along again
        await surface.post_answer(thread, f"{run.answer}\n\n{REPOSTED_NOTE}", files=files)
        reply = queries.new_message(
            conversation_id=run.conversation_id, role="assistant", text=run.answer
        )
        await self._db.run(queries.finish_run, run.id, reply, status="done", current=(ANSWERING,))
        if run.status_message_id:
            view = StatusView(state="done", headline="Done")
            await surface.update_status(MessageRef(thread, run.status_message_id), view)
