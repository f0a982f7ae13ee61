"""RunManager: thread -> conversation -> run. One active run per thread, many threads at once.

`dispatch()` is what every surface calls with a parsed message. It deduplicates by event id (an
in-memory TTL cache in front of the `processed_event` table), finds or creates the conversation,
stores the message, and then either queues it as an interrupt for the thread's active run or
starts a run with the thread's history. Each run is an asyncio task owned here; what the task
does (status message, agent, answer, endings) is `bot.runs.runner.ConversationRunner`, and the
engine checkpoints it after every iteration. Recovery (`bot.runs.recovery`) adopts the runs of
processes that are gone (`adopt`), from their last checkpoint; until it has claimed the threads
it resumes at start-up, `dispatch()` waits. A reply for a run another process owns is mail
(`bot.runs.mail`). `close()` cancels and awaits every task, leaving
waiting runs waiting, so the next process picks them up. Every ending of a run is a conditional
transition (`queries.transition_run`): a run has one outcome, and only the winner tells the
thread.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from sqlalchemy import Engine

from bot.approvals.broker import ApprovalBroker
from bot.config import Settings
from bot.runs.dedupe import DedupePruner
from bot.runs.leases import LeaseKeeper, ProcessIdentity
from bot.runs.mail import PostOffice
from bot.runs.runner import ConversationRunner, lose
from bot.runs.stopping import RunStopper
from bot.runs.types import (
    ActiveRun,
    Agent,
    DispatchOutcome,
    Listener,
    RecentEvents,
)
from bot.storage import queries as queries
from bot.storage.database import Database, as_database
from bot.storage.models import Conversation, Run
from bot.storage.wakeups import LoopbackWakeups, Wakeup, Wakeups
from bot.surfaces.base import InboundMessage, MessageRef, Surface, ThreadRef
from bot.surfaces.controls import StopRequest, StopResult, stop_result

log = logging.getLogger(__name__)

__all__ = ["ActiveRun", "Agent", "DispatchOutcome", "RunManager"]

BUSY_NOTICE = (
    "I am busy with many other requests right now, so I did not start on this one. "
    "Please try again in a minute."
)


class RunManager:
    """Owns every active run of the process (see the module docstring)."""

    def __init__(
        self,
        *,
        db: Database | Engine,
        agent: Agent,
        broker: ApprovalBroker,
        settings: Settings,
        leases: LeaseKeeper | None = None,
        wakeups: Wakeups | None = None,
        status_interval_s: float = 1.0,
        dedupe_ttl_s: float = 600.0,
        history_limit: int = 50,
    ) -> None:
        """`db`: the app's database (or engine); `agent`: the ReActAgent (one serves all runs;
        its hooks should include `install_runtime_hooks`); `broker`: approvals, shares the
        registered surfaces; `status_interval_s`: least time between two status edits;
        `dedupe_ttl_s`: how long event ids stay in the in-memory cache (the table is the
        truth); `history_limit`: thread messages given to a new run; `leases`: this
        process's identity and leases (every run it starts or adopts is its own);
        `wakeups`: how other processes hear of a reply for a run they own."""
        self._db = as_database(db)
        self.leases = leases or LeaseKeeper(
            self._db, ProcessIdentity.of_this_process(), settings.chatops_lease_s
        )
        self._wakeups: Wakeups = wakeups or LoopbackWakeups()
        self._agent = agent
        self._broker = broker
        self._settings = settings
        self._status_interval = status_interval_s
        self._history_limit = history_limit
        self._surfaces: dict[str, Surface] = {}
        self._listeners: list[Listener] = []
        self._active: dict[int, ActiveRun] = {}
        self._recent = RecentEvents(ttl_s=dedupe_ttl_s)
        self._pruner = DedupePruner(self._db)
        self._changed = asyncio.Condition()
        self._ready = asyncio.Event()  # cleared while recovery claims the threads it resumes
        self._ready.set()
        self._closing = False
        self._runner = ConversationRunner(
            db=self._db,
            agent=agent,
            broker=broker,
            surfaces=self._surfaces,
            listeners=self._listeners,
            closing=lambda: self._closing,
            status_interval_s=status_interval_s,
            history_limit=history_limit,
            leases=self.leases,
            secrets=settings.secret_values(),
        )
        self._stopper = RunStopper(self._db, broker, self._active.values, self._wakeups.send)
        self._mail = PostOffice(self._db, self.leases, self._wakeups, self)

    @property
    def db(self) -> Database:
        return self._db

    @property
    def wakeups(self) -> Wakeups:
        return self._wakeups

    def register_surface(self, surface: Surface) -> None:
        """Route runs of `surface.platform` to this surface (the broker gets it too)."""
        self._surfaces[surface.platform] = surface
        self._broker.register_surface(surface)

    def surfaces(self) -> dict[str, Surface]:
        """The registered surfaces by platform (scheduled reports post through them)."""
        return dict(self._surfaces)

    def add_listener(self, listener: Listener) -> None:
        """`listener(run_id, event)` sees every step and runtime event (the web console)."""
        self._listeners.append(listener)

    @property
    def active_count(self) -> int:
        return len(self._active)

    def active_runs(self) -> list[ActiveRun]:
        return list(self._active.values())

    def active_by_run(self, run_id: str) -> ActiveRun | None:
        return next((a for a in self._active.values() if a.run_id == run_id), None)

    def active_run(self, thread: ThreadRef) -> ActiveRun | None:
        return next((a for a in self._active.values() if a.thread == thread), None)

    def active_in(self, conversation_id: int) -> ActiveRun | None:
        return self._active.get(conversation_id)

    def claim(self, conv: Conversation) -> ActiveRun:
        """A new active run of the conversation, registered before any await: one run per
        conversation."""
        assert conv.id is not None
        thread = ThreadRef(conv.platform, conv.workspace, conv.channel, conv.root)
        active = ActiveRun(conversation_id=conv.id, thread=thread, direct=conv.direct)
        self._active[conv.id] = active
        return active

    async def start_next(self, active: ActiveRun) -> None:
        """Start the run the replies delivered to `active` ask for (`bot.runs.mail`)."""
        try:
            follow = await self._runner.next_run(active, "")
        except BaseException:
            await self.release(active)
            raise
        assert follow is not None  # the replies are its query
        self._launch(active, follow)
        active.people.update(active.first_requesters)  # each author may stop it at once

    # --- inbound ---------------------------------------------------------------------------------

    async def wait_ready(self) -> None:
        await self._ready.wait()

    async def dispatch(
        self, message: InboundMessage, inbox_id: int | None = None
    ) -> DispatchOutcome:
        """Deduplicate, store, then interrupt the thread's active run or start one. A message
        from the inbox (`inbox_id`) was deduplicated when stored; its row goes with it."""
        await self._ready.wait()
        if inbox_id is None and self._recent.seen(message.event_id):
            return DispatchOutcome("duplicate")
        await self._pruner.after_dispatch()
        thread = message.thread
        key = (thread.platform, thread.workspace, thread.channel, thread.root)
        verdict, conv = await self._db.run(
            queries.accept_inbound,
            message.event_id,
            key,
            mentions_bot=message.mentions_bot,
            direct=message.direct,
            inbox_id=inbox_id,
        )
        if verdict == "duplicate":
            return DispatchOutcome("duplicate")
        if conv is None or conv.id is None:
            return DispatchOutcome("ignored")
        row = queries.new_message(
            conversation_id=conv.id,
            role="user",
            author=message.user_id,
            text=message.text,
            platform_id=message.message_id or None,
        )
        active = self._active.get(conv.id)
        if active is not None:
            active.interrupts.put(message.text, author=message.user_id)
            active.people.add(message.user_id)  # a requester from now on: they may stop it
            entry = (message.user_id, None)
            active.queued.append(entry)
            row.pinned = True
            stored, _, _ = await self._db.run(queries.add_message_and_run, row, None, inbox_id)
            if entry in active.queued:
                active.queued[active.queued.index(entry)] = (message.user_id, stored.id)
            return DispatchOutcome("interrupt", conv.id, active.run_id)
        if len(self._active) >= self._settings.chatops_max_active_runs:
            return await self._busy(message, inbox_id)
        active = ActiveRun(conversation_id=conv.id, thread=thread, direct=conv.direct)
        self._active[conv.id] = active  # claimed before any await: one run per conversation
        run = queries.new_run(
            conversation_id=conv.id, requester=message.user_id, query=message.text,
            owner=self.leases.me, lease_until=self.leases.until(),
        )  # fmt: skip
        try:
            stored, started, mail = await self._db.run(
                queries.add_message_and_run, row, run, inbox_id
            )
        except BaseException:
            await self.release(active)
            raise
        if mail is not None:  # another process owns the thread's run: the reply went there
            await self._mail.forward(active, mail)
            return DispatchOutcome("forwarded", conv.id, mail.run_id)
        assert started is not None
        self._launch(active, started, before_id=stored.id)
        return DispatchOutcome("started", conv.id, started.id)

    async def _busy(self, message: InboundMessage, inbox_id: int | None) -> DispatchOutcome:
        """Too many runs at once (CHATOPS_MAX_ACTIVE_RUNS): say so in the thread, start none.
        The message is not kept as the thread's history; asking again starts normally."""
        if inbox_id is not None:
            await self._db.run(queries.delete_inbox_event, inbox_id)
        log.warning(
            "busy: %d runs active; not starting one for %s", len(self._active), message.thread
        )
        surface = self._surfaces.get(message.thread.platform)
        if surface is not None:
            try:
                await surface.post_notice(message.thread, BUSY_NOTICE)
            except Exception:  # noqa: BLE001 - the refusal stands even if it cannot be told
                log.exception("could not tell %s that the bot is busy", message.thread)
        return DispatchOutcome("busy")

    # --- lifecycle -------------------------------------------------------------------------------

    def hold_dispatch(self) -> None:
        """Recovery starts: `dispatch()` waits until `mark_ready()`."""
        self._ready.clear()

    def mark_ready(self) -> None:
        """Recovery has claimed every thread it resumes: new messages may be dispatched."""
        self._ready.set()

    async def adopt(self, run: Run, conv: Conversation) -> bool:
        """Continue a run whose process stopped (this process holds its lease now): from its
        checkpoint, or, if it never wrote one (no tool had been called), from its request
        again. False when it cannot be (a wait for an approval with no checkpoint, or its
        thread busy here)."""
        if conv.id is None or conv.id in self._active:
            return False
        if run.checkpoint is None and run.status != "running":
            return False
        active = self.claim(conv)
        before_id = None
        if run.checkpoint is None:
            try:
                before_id = await self._db.run(queries.request_message_id, run)
            except BaseException:
                await self.release(active)
                raise
        ref = MessageRef(active.thread, run.status_message_id) if run.status_message_id else None
        self._launch(active, run, before_id=before_id, resume_from=run.checkpoint, status_ref=ref)
        active.people.update((run.checkpoint or {}).get("requesters") or (run.requester,))
        log.info("adopted run %s (%s) in %s", run.id, run.status, active.thread)
        return True

    # --- other processes -------------------------------------------------------------------------

    def lose(self, run_id: str) -> None:
        """Another process took the run over: stop its task here without ending it."""
        active = self.active_by_run(run_id)
        if active is not None:
            lose(active, f"run {run_id}: another process took it over")

    async def take_mail(self, run_ids: list[str] | None = None) -> int:
        """Take the mail of this process's runs (all, or `run_ids`) into their interrupts."""
        return await self._mail.take(run_ids)

    async def take_over_mail(self, run_id: str) -> None:
        """The run ended before anyone took its mail: it starts the thread's next run here."""
        await self._mail.take_over(run_id)

    def hears(self, wakeup: Wakeup) -> bool:
        """True when the wake-up is about a run of this process."""
        return self.active_by_run(wakeup.run_id) is not None

    async def close(self) -> None:
        """Cancel and await every run task (waiting runs stay `waiting_approval` for restart)."""
        self._closing = True
        tasks = [a.task for a in self._active.values() if a.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self._stopper.close()
        await self._broker.close()

    async def stopped_elsewhere(self, run_id: str, by: str) -> None:
        """A stop another process recorded for a run of this one (`bot.runs.peers`)."""
        await self._stopper.stopped_elsewhere(run_id, by)

    async def stop(self, run_id: str, *, by: str, platform: str) -> StopResult:
        """A person stops a run: the one entry point (`bot.runs.stopping`). `by` is the
        platform's verified user; only the run's requesters and approvers may."""
        return await self._stopper.stop(run_id, by=by, platform=platform)

    async def stop_request(self, request: StopRequest) -> StopResult:
        """The surfaces' `stop` port: find the run the request means, then `stop` it."""
        run_id = await self._stopper.locate(request)
        if run_id is None:
            return stop_result("not_found")
        return await self.stop(run_id, by=request.user_id, platform=request.platform)

    async def cancel(self, thread: ThreadRef) -> bool:
        """Stop the thread's active run (its pending approvals end as cancelled)."""
        active = self.active_run(thread)
        if active is None or active.task is None:
            return False
        active.task.cancel()
        await asyncio.gather(active.task, return_exceptions=True)
        return True

    async def wait_idle(self, timeout: float) -> None:  # noqa: ASYNC109 - agreed API
        """Wait until no run is active (tests and graceful shutdown)."""

        async def _idle() -> None:
            async with self._changed:
                await self._changed.wait_for(lambda: not self._active)

        await asyncio.wait_for(_idle(), timeout)

    async def release(self, active: ActiveRun) -> None:
        if self._active.get(active.conversation_id) is active:
            del self._active[active.conversation_id]
        async with self._changed:
            self._changed.notify_all()

    # --- one conversation's task -----------------------------------------------------------------

    def _launch(
        self,
        active: ActiveRun,
        run: Run,
        *,
        before_id: int | None = None,
        resume_from: dict[str, Any] | None = None,
        status_ref: MessageRef | None = None,
    ) -> None:
        active.begin(run.id, run.requester)
        active.task = asyncio.create_task(
            self._conversation(active, run, before_id, resume_from, status_ref),
            name=f"run-{run.id}",
        )

    async def _conversation(
        self,
        active: ActiveRun,
        run: Run,
        before_id: int | None,
        resume_from: dict[str, Any] | None,
        status_ref: MessageRef | None,
    ) -> None:
        """The conversation's task (`ConversationRunner`); the thread is free again after."""
        try:
            await self._runner.conversation(active, run, before_id, resume_from, status_ref)
        finally:
            await asyncio.shield(self.release(active))
