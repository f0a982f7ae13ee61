"""How a run ends: answered, cancelled, stopped or failed, and what the thread is told of it.

Every ending is a conditional transition (`queries.finish_run`): a run has one outcome, and only
the winner tells the thread; a run this process no longer holds ends elsewhere, and what it
streamed says so (`TAKEN_OVER`). Whatever ends a run first ends its approvals still pending.
`bot.runs.runner.ConversationRunner` holds one and calls it where a run's steps end.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from bot.approvals.broker import ApprovalBroker
from bot.chat.surface import Surface
from bot.chat.threads import MessageRef, ThreadRef
from bot.chat.views import AnswerFile
from bot.engine.llm import LLMError
from bot.observability.metrics import Metrics
from bot.observability.tracing import mark_run_outcome
from bot.redaction import Redactor
from bot.runs.answering import AnswerDelivery
from bot.runs.leases import LeaseKeeper
from bot.runs.status import StatusReporter
from bot.statuses import UNFINISHED_RUN_STATES, RunStatus
from bot.storage import queries as queries
from bot.storage.database import Database, through_outage
from bot.storage.models import Message, Run

log = logging.getLogger(__name__)

ANSWERING = RunStatus.ANSWERING  # the answer is stored and being posted
UNFINISHED = UNFINISHED_RUN_STATES  # the states the run's own task may end it from
# a half-streamed answer of a run this task cannot end (another process took it, or it ended)
TAKEN_OVER = "(The answer was cut short: this run is finished elsewhere.)"


@dataclass(frozen=True)
class _Tracked:
    """A run this process runs: its thread's (platform, workspace), since when (this host's
    monotonic clock: a run another host began has a start by that host's wall clock, which
    may disagree with this one's), and whether it began here."""

    where: tuple[str, str]
    since: float
    fresh: bool

    def took(self) -> str:
        took = f"{time.monotonic() - self.since:.1f} s"
        return took if self.fresh else f"{took} here (it began elsewhere or before a restart)"


class RunEndings:
    """The endings of one `ConversationRunner`'s runs; shared by every task of a `RunManager`."""

    def __init__(
        self,
        *,
        db: Database,
        broker: ApprovalBroker,
        leases: LeaseKeeper,
        redactor: Redactor,
        metrics: Metrics,
    ) -> None:
        """`broker`: ends a run's approvals still pending; `leases`: this process's (a run is
        ended only while its lease is ours, at its epoch); `redactor`: every secret the process
        knows, masked in a failure's text; `metrics`: the runtime's (a run's ending is counted
        where it is won)."""
        self._db = db
        self._broker = broker
        self._leases = leases
        self._redactor = redactor
        self._metrics = metrics
        # run id -> where and since when this process runs it: the per-workspace counts of
        # its ending and the time it took (bounded by the runs active here)
        self._tracked: dict[str, _Tracked] = {}

    @contextlib.contextmanager
    def tracking(
        self, run_id: str, platform: str, workspace: str, *, fresh: bool
    ) -> Iterator[None]:
        """While a run goes on here: its ending is counted in its workspace; `fresh`: it
        begins now (counted as started; a resumed one was counted where it began)."""
        if fresh:
            self._metrics.run_started(platform, workspace)
        self._tracked[run_id] = _Tracked((platform, workspace), time.monotonic(), fresh)
        try:
            yield
        finally:
            self._tracked.pop(run_id, None)

    async def post_answer(
        self,
        run: Run,
        delivery: AnswerDelivery,
        files: Sequence[AnswerFile],
        reply: Message,
    ) -> bool:
        """Post the stored answer, then record it; what `_answered` says."""
        posted = await delivery.deliver(reply.text, files)
        return await self._answered(run, posted, reply)

    async def _answered(self, run: Run, posted: MessageRef, reply: Message) -> bool:
        """The answer is in the thread: end the run done and record where, in one commit
        (an adopter of the `answering` run then never posts it again), across a database
        outage. Nothing after the post is the run's failure: False (logged) when it could not
        be ended; where the answer is is still recorded then, for the process that holds it."""
        where = {"answer_message_id": posted.message_id}
        try:
            done = RunStatus.DONE
            if await self._end_through_outage(
                run, done, reply=reply, current=(ANSWERING,), **where
            ):
                return True
            log.warning("run %s: its answer is posted, but another process holds it", run.id)
            await through_outage(
                lambda: self._db.run(queries.update_run, run.id, **where),
                f"recording the answer of run {run.id}",
            )
        except Exception:  # noqa: BLE001 - the answer is out: no failure notice after it
            log.exception("run %s: its answer is posted, but the run could not be ended", run.id)
        return False

    async def cancelled(self, run: Run, reporter: StatusReporter, delivery: AnswerDelivery) -> None:
        if await self.end_run(run, RunStatus.CANCELLED):
            await delivery.abandon("(Cancelled before the answer was finished.)")
            await reporter.finish(RunStatus.CANCELLED, headline="Cancelled")
        else:
            await delivery.abandon(TAKEN_OVER)
            await reporter.close()

    async def stopped(
        self,
        run: Run,
        reporter: StatusReporter,
        delivery: AnswerDelivery,
        surface: Surface,
        thread: ThreadRef,
        by: str,
    ) -> None:
        """A person stopped the run: it ends cancelled, and the thread says who stopped it."""
        try:
            if not await self.end_run(run, RunStatus.CANCELLED, error=f"stopped by {by}"):
                await delivery.abandon(TAKEN_OVER)
                await reporter.close()
                return
            await delivery.abandon("(Stopped before the answer was finished.)")
            await reporter.finish(RunStatus.CANCELLED, headline="Stopped")
            await surface.post_notice(thread, "stopped this run.", mention=(by,))
        except Exception:  # noqa: BLE001 - telling the thread must not raise either
            log.exception("could not report that run %s was stopped", run.id)

    async def failed(
        self,
        run: Run,
        reporter: StatusReporter,
        delivery: AnswerDelivery,
        where: tuple[Surface, ThreadRef],
        exc: Exception,
    ) -> None:
        """Mark the run failed and say so in the thread; the exception text stays in the logs
        (a model's failure is told as it is: where, and what to check). The thread is told only
        once the failure is recorded: a failure that cannot be (the database is gone) leaves the
        run to whoever adopts it, and one outcome in the thread."""
        kind = type(exc).__name__
        surface, thread = where
        try:
            error = self._redactor.text(f"{kind}: {str(exc)[:500]}")
            if isinstance(exc, LLMError):
                told = self._redactor.text(exc.user_message)
                error = f"{kind}: {told}"
                notice = f"Sorry, this run failed: {told}."
            else:
                notice = f"Sorry, this run failed ({kind}). Ask again to retry."
            if not await self._end_through_outage(run, RunStatus.FAILED, error=error):
                # it ended otherwise (cancelled, failed elsewhere) or goes on elsewhere
                await delivery.abandon(TAKEN_OVER)
                await reporter.close()
                return
            await delivery.abandon("(The answer was cut short: the run failed.)")
            await reporter.finish(RunStatus.FAILED, headline="Failed")
            await surface.post_notice(thread, notice)
        except asyncio.CancelledError:  # lost (or shut down) while the database was away
            await asyncio.shield(delivery.abandon(TAKEN_OVER))
            raise
        except Exception:  # noqa: BLE001 - reporting the failure must not raise either
            log.exception("could not report the failure of run %s", run.id)
            await reporter.close()

    async def _end_through_outage(self, run: Run, status: RunStatus, **values: Any) -> bool:
        """`end_run` across a database outage; it still ends the run only while this process
        holds it at its epoch (another may have adopted it meanwhile)."""
        return await through_outage(
            lambda: self.end_run(run, status, **values), f"ending run {run.id}"
        )

    async def end_run(
        self,
        run: Run,
        status: RunStatus,
        *,
        reply: Message | None = None,
        current: tuple[RunStatus, ...] = UNFINISHED,
        **values: Any,
    ) -> bool:
        """End the run if it is still unfinished (or in `current`); False if it had ended.

        Whatever ends a run (done, failed, cancelled) first ends its approvals still pending
        (a call of a parallel batch, a gate that gave up): a card must never outlive its run,
        nor a click on it approve a call nobody will make.
        """
        await self._broker.cancel_run(
            run.id, reason=f"the run ended ({status})", held_here=run.lease_epoch == 0
        )
        ended = await self._db.run(
            queries.finish_run, run.id, reply, status=status, current=current,
            fence=self._leases.fence(run), **values,
        )  # fmt: skip
        if ended:
            tracked = self._tracked.get(run.id)
            self._metrics.run_ended(status, tracked.where if tracked else None)
            mark_run_outcome(str(status))
            took = f" after {tracked.took()}" if tracked else ""
            why = f": {values['error']}" if values.get("error") else ""
            log.info("run %s ended %s%s%s", run.id, status, took, why)
        return ended
