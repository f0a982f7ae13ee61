"""Stop: a person ends a run from the chat. Who may, which run is meant, and what a stop does.

Only the run's requesters (everyone whose message it has read: the starter, the authors of
the thread history it was given, every interrupter whose reply the engine has drained into the
run; a reply still queued does not count yet) and the approvers of its
approvals (listed, through groups, or who decided one) may stop it; the user id comes from the
platform's verified payload, and the run from the message the button was on (its status
message) or the thread of Slack's native stop, never from what a button carried. A stop is
recorded on the run row first (`stopped_by`: a restart never resumes a stopped run), then the
run's `StopSignal` is set (the engine abandons the model call, lets a running tool finish, runs
nothing more) and its pending approvals are cancelled, their cards updated, on a task this
object owns (the click's acknowledgement does not wait for card edits). A run another process
owns is stopped the same way: the stop is recorded on its row here, and its owner, woken (or
at its next heartbeat), applies it (`stopped_elsewhere`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable

from bot.approvals.broker import ApprovalBroker
from bot.chat.controls import StopRequest, StopResult, stop_result
from bot.runs.active import ActiveRun
from bot.runs.feedback import run_of_message
from bot.storage import feedback as feedback_queries
from bot.storage import leases as lease_queries
from bot.storage import queries as queries
from bot.storage.database import Database
from bot.storage.wakeups import Wakeup

log = logging.getLogger(__name__)


class RunStopper:
    """The one way a run is stopped by a person (`RunManager.stop` / `stop_request`)."""

    def __init__(
        self,
        db: Database,
        broker: ApprovalBroker,
        active: Callable[[], Iterable[ActiveRun]],
        wake: Callable[[Wakeup], Awaitable[None]],
    ) -> None:
        """`active()`: the process's live runs (the run manager's); `wake`: tell the other
        processes (the run's owner) that a run was stopped."""
        self._db = db
        self._broker = broker
        self._active = active
        self._wake = wake
        self._tasks: set[asyncio.Task[None]] = set()

    async def locate(self, request: StopRequest) -> str | None:
        """The id of the run the request means, or None."""
        if request.run_id:
            return request.run_id
        if request.thread is not None:
            live = next((a for a in self._active() if a.thread == request.thread), None)
            if live is not None:
                return live.run_id
            t = request.thread  # its run may live in another process
            key = (t.platform, t.workspace, t.channel, t.root)
            return await self._db.run(lease_queries.live_run_of_thread, key)
        if request.message is not None:
            return await run_of_message(self._db, request.platform, request.message, kind="status")
        return None

    async def stop(self, run_id: str, *, by: str, platform: str) -> StopResult:
        """Stop `run_id` for `by` (a verified user of `platform`), if they may."""
        active = next((a for a in self._active() if a.run_id == run_id), None)
        if active is None or active.thread.platform != platform:
            return await self._not_live(run_id, platform, by)
        if active.stop.requested:  # it may have ended since (its task is winding up)
            return await self._not_live(run_id, platform, by)
        if not await self._may_stop(run_id, active.people, by):
            return stop_result("refused", run_id)
        live = queries.LIVE_RUN_STATES
        if not await self._db.run(feedback_queries.mark_stopped, run_id, by, live):
            return stop_result("not_running", run_id)  # it ended, or was stopped, meanwhile
        if not active.stop.request(by):
            return stop_result("already_stopping", run_id)
        log.info("run %s stopped by %s", run_id, by)
        self._cancel_in_background(run_id, by)
        return stop_result("stopping", run_id)

    async def stopped_elsewhere(self, run_id: str, by: str) -> None:
        """Another process recorded a stop of this process's run: apply it here."""
        active = next((a for a in self._active() if a.run_id == run_id), None)
        if active is None or not active.stop.request(by):
            return
        log.info("run %s stopped by %s (recorded by another process)", run_id, by)
        self._cancel_in_background(run_id, by)

    def _cancel_in_background(self, run_id: str, by: str) -> None:
        task = asyncio.create_task(self._cancel_approvals(run_id, by), name=f"stop {run_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _cancel_approvals(self, run_id: str, by: str) -> None:
        """The run's pending approvals end cancelled (their cards say so); the gates waiting
        for them return, and the engine then sees the stop."""
        try:
            await self._broker.cancel_run(run_id, reason=f"the run was stopped by {by}")
        except Exception:  # noqa: BLE001 - the run's own ending cancels them again
            log.exception("run %s: cancelling its approvals after a stop failed", run_id)

    async def _may_stop(self, run_id: str, people: Iterable[str], user_id: str) -> bool:
        """`user_id` is one of the run's requesters (`people`) or an approver of its approvals;
        a refusal is logged."""
        if user_id and (user_id in people or user_id in await self._broker.run_approvers(run_id)):
            return True
        log.info("run %s: a stop by %s was refused", run_id, user_id)
        return False

    async def _not_live(self, run_id: str, platform: str, by: str) -> StopResult:
        """Not live in this process: unknown (or another platform's), ended, or live in
        another process (then stopped from here: the row first, then its owner is woken)."""
        found = await self._db.run(feedback_queries.run_with_conversation, run_id)
        if found is None or found[1].platform != platform:
            return stop_result("not_found", run_id)
        run = found[0]
        live = queries.LIVE_RUN_STATES
        if run.status not in live:
            return stop_result("not_running", run_id)
        if run.stopped_by:
            return stop_result("already_stopping", run_id)
        people = {run.requester, *((run.checkpoint or {}).get("requesters") or ())}
        if not await self._may_stop(run_id, people, by):
            return stop_result("refused", run_id)
        if not await self._db.run(feedback_queries.mark_stopped, run_id, by, live):
            return stop_result("not_running", run_id)
        log.info("run %s stopped by %s; its process is told", run_id, by)
        await self._wake(Wakeup("stop", run_id=run_id))
        return stop_result("stopping", run_id)

    async def close(self) -> None:
        """Wait for the cancellations in flight (shutdown)."""
        await asyncio.gather(*list(self._tasks), return_exceptions=True)
