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

from bot.approvals.broker import ApprovalBroker
from bot.chat.controls import StopRequest, StopResult, stop_result
from bot.chat.events import Listener
from bot.chat.ports import DispatchOutcome
from bot.chat.streaming import STREAM_INTERVAL_S
from bot.chat.surface import Surface
from bot.chat.threads import InboundMessage, MessageRef, ThreadRef
from bot.chat.workspaces import WorkspacePolicies
from bot.config import Settings
from bot.elicitation.service import Elicitations
from bot.observability.metrics import Metrics
from bot.observability.tracing import Tracing
from bot.recent_events import RecentEvents
from bot.redaction import Redactor
from bot.runs.active import ActiveRun, lose
from bot.runs.admission import Admission
from bot.runs.agent import Agent
from bot.runs.dedupe import DedupePruner
from bot.runs.leases import LeaseKeeper, ProcessIdentity
from bot.runs.mail import PostOffice
from bot.runs.refusals import BUSY_NOTICE, Refusals, runs_limit_notice
from bot.runs.runner import ConversationRunner
from bot.runs.stopping import RunStopper
from bot.statuses import RunStatus
from bot.storage import queries as queries
from bot.storage.database import Database
from bot.storage.limits import PersonalCap, PersonalLimitReached
from bot.storage.models import Conversation, Message, Run
from bot.storage.wakeups import LoopbackWakeups, Wakeup, Wakeups

log = logging.getLogger(__name__)

# a reply whose thread's mention waits in another process's inbox: looked at again this often,
# this many times (10 s in all: that process's inbox pause and a commit, with room under load)
MENTION_WAIT_S = 0.1
MENTION_WAIT_TRIES = 100

__all__ = ["ActiveRun", "Agent", "DispatchOutcome", "RunManager"]


class RunManager:
    """Owns every active run of the process (see the module docstring)."""

    def __init__(
        self,
        *,
        db: Database,
        agent: Agent,
        broker: ApprovalBroker,
        settings: Settings,
        leases: LeaseKeeper | None = None,
        wakeups: Wakeups | None = None,
        status_interval_s: float = 1.0,
        answer_interval_s: float = STREAM_INTERVAL_S,
        dedupe_ttl_s: float = 600.0,
        history_limit: int = 50,
        redactor: Redactor | None = None,
        metrics: Metrics | None = None,
        tracing: Tracing | None = None,
        workspaces: WorkspacePolicies | None = None,
    ) -> None:
        """`db`: the app's database; `agent`: the ReActAgent (one serves all runs;
        its hooks are built by `hooks.chain`); `broker`: approvals, shares the
        registered surfaces; `status_interval_s`: least time between two status edits;
        `answer_interval_s`: least time between two updates of a streamed answer;
        `dedupe_ttl_s`: how long event ids stay in the in-memory cache (the table is the
        truth); `history_limit`: thread messages given to a new run; `leases`: this
        process's identity and leases (every run it starts or adopts is its own);
        `wakeups`: how other processes hear of a reply for a run they own; `redactor`: every
        secret the process knows (default: the settings' and the agent's tools'); `metrics`: the
        runtime's (default: a registry of its own, which nobody scrapes); `tracing`: the
        process's traces (a "run" span per run; default: off); `workspaces`: what applies per
        workspace (its connectors, its per-person run limit; default: the settings')."""
        self._db = db
        self.leases = leases or LeaseKeeper(
            self._db, ProcessIdentity.of_this_process(), settings.chatops_lease_s
        )
        self._wakeups: Wakeups = wakeups or LoopbackWakeups()
        self._agent = agent
        self._broker = broker
        self._settings = settings
        self._workspaces = workspaces or WorkspacePolicies()
        self._status_interval = status_interval_s
        self._history_limit = history_limit
        self._surfaces: dict[str, Surface] = {}
        self._listeners: list[Listener] = []
        self._active: dict[int, ActiveRun] = {}
        self._opening_seats = 0  # runs being stored with their new thread (`_opening`)
        self._recent = RecentEvents(ttl_s=dedupe_ttl_s)
        self._pruner = DedupePruner(self._db)
        self._changed = asyncio.Condition()
        self._ready = asyncio.Event()  # cleared while recovery claims the threads it resumes
        self._ready.set()
        self._closing = False
        self.metrics = metrics or Metrics()
        self.admission = Admission(settings.chatops_max_working_runs)
        # tools' questions to a run's people (MCP elicitation): the surfaces' `Questions` port
        self.questions = Elicitations(
            self._surfaces, timeout_s=settings.chatops_elicitation_timeout_s
        )
        self._runner = ConversationRunner(
            db=self._db,
            agent=agent,
            broker=broker,
            surfaces=self._surfaces,
            listeners=self._listeners,
            closing=lambda: self._closing,
            status_interval_s=status_interval_s,
            answer_interval_s=answer_interval_s,
            history_limit=history_limit,
            leases=self.leases,
            redactor=redactor
            or Redactor(settings.secret_values(), source=agent.tools.secret_values),
            metrics=self.metrics,
            tracing=tracing or Tracing.off(),
            admission=self.admission,
            questions=self.questions,
        )
        self._stopper = RunStopper(self._db, broker, self._active.values, self._wakeups.send)
        self._mail = PostOffice(self._db, self.leases, self._wakeups, self)
        self._refusals = Refusals(self._db, self._surfaces)

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
        opening = self._opening(message)
        try:
            verdict, conv = await self._accept(message, key, inbox_id, opening)
        finally:
            self._opening_seats -= opening is not None  # the run claims its thread, or none
        if verdict == "duplicate":
            return DispatchOutcome("duplicate")
        if conv is None or conv.id is None:
            return DispatchOutcome("ignored")
        if verdict == "started" and opening is not None:
            return await self._opened(conv, message, opening)
        row = self._user_message(message, conv.id)
        active = self._active.get(conv.id)
        if active is not None:
            # its author becomes a requester (who may stop the run) once the engine reads it
            active.interrupts.put(message.text, author=message.user_id)
            entry = (message.user_id, None)
            active.queued.append(entry)
            row.pinned = True
            stored, _, _ = await self._db.run_first(
                queries.add_message_and_run, row, None, inbox_id
            )
            if entry in active.queued:
                active.queued[active.queued.index(entry)] = (message.user_id, stored.id)
            return DispatchOutcome("interrupt", conv.id, active.run_id)
        if len(self._active) + self._opening_seats >= self._settings.chatops_max_active_runs:
            return await self._busy(message, inbox_id)
        active = ActiveRun(conversation_id=conv.id, thread=thread, direct=conv.direct)
        self._active[conv.id] = active  # claimed before any await: one run per conversation
        run, cap = self._new_run(message, conv.id)
        try:
            stored, started, mail = await self._db.run_first(
                queries.add_message_and_run, row, run, inbox_id, self.leases.lease_s, cap=cap
            )
        except PersonalLimitReached as full:
            # a reply queued here meanwhile is stored as the thread's history; it starts no
            # run (else a reply racing the refused mention would slip past the cap)
            await self.release(active)
            return await self._limited(message, inbox_id, full)
        except BaseException:
            await self.release(active)
            raise
        if mail is not None:  # another process owns the thread's run: the reply went there
            await self._mail.forward(active, mail)
            return DispatchOutcome("forwarded", conv.id, mail.run_id)
        assert started is not None
        self._launch(active, started, before_id=stored.id)
        return DispatchOutcome("started", conv.id, started.id)

    def _user_message(self, message: InboundMessage, conversation_id: int) -> Message:
        return queries.new_message(
            conversation_id=conversation_id,
            role="user",
            author=message.user_id,
            text=message.text,
            platform_id=message.message_id or None,
        )

    def _new_run(self, message: InboundMessage, conversation_id: int) -> tuple[Run, PersonalCap]:
        """The run `message` starts, owned here, and its author's cap (their workspace's)."""
        thread = message.thread
        policy = self._workspaces.for_workspace(thread.platform, thread.workspace)
        asked = frozenset(message.connectors) if message.connectors is not None else None
        connectors = policy.narrow(asked)  # a trigger's list, within the workspace's
        run = queries.new_run(
            conversation_id=conversation_id, requester=message.user_id, query=message.text,
            owner=self.leases.me,
            connectors=sorted(connectors) if connectors is not None else None,
        )  # fmt: skip
        per_person = policy.max_active_runs_per_user
        cap = PersonalCap(
            "runs", message.user_id, per_person or self._settings.chatops_max_active_runs_per_user
        )
        return run, cap

    def _opening(self, message: InboundMessage) -> queries.Opening | None:
        """For a mention that may open a new thread, its message and run, to be stored with
        the thread in one transaction; a seat is held for the run meanwhile (None past
        CHATOPS_MAX_ACTIVE_RUNS: the usual way refuses it)."""
        seats = len(self._active) + self._opening_seats
        if not message.mentions_bot or seats >= self._settings.chatops_max_active_runs:
            return None
        self._opening_seats += 1
        # the conversation's id is set when it is made; the message is made first, as the run
        # is started by it (an adopted run finds its request by `created_at <= started_at`)
        row = self._user_message(message, 0)
        run, cap = self._new_run(message, 0)
        return queries.Opening(row, run, self.leases.lease_s, cap)

    async def _opened(
        self, conv: Conversation, message: InboundMessage, opening: queries.Opening
    ) -> DispatchOutcome:
        """The mention opened its thread, and its message and run are stored: claim the thread
        and start the run. The thread was made in that transaction, and a thread's messages are
        dispatched one after another, so no other run can have claimed it; if one has all the
        same, the mention is read by that run and the stored run ends."""
        assert conv.id is not None
        run = opening.run
        other = self._active.get(conv.id)
        if other is not None:
            log.warning("thread %s was claimed while its first run was stored", message.thread)
            other.interrupts.put(message.text, author=message.user_id)
            other.queued.append((message.user_id, opening.message.id))
            await self._db.run(queries.finish_run, run.id, None, status=RunStatus.CANCELLED)
            return DispatchOutcome("interrupt", conv.id, other.run_id)
        active = ActiveRun(
            conversation_id=conv.id, thread=message.thread, direct=conv.direct, new_thread=True
        )
        self._active[conv.id] = active
        self._launch(active, run, before_id=opening.message.id)
        return DispatchOutcome("started", conv.id, run.id)

    async def _accept(
        self,
        message: InboundMessage,
        key: tuple[str, str, str, str],
        inbox_id: int | None,
        opening: queries.Opening | None,
    ) -> tuple[str, Conversation | None]:
        """Dedupe and find the conversation (with `opening`, a new thread's message and run
        stored with it: "started"). A reply from the inbox to a thread not known yet waits
        (bounded) while the mention that opens the thread waits in an inbox: the other process
        may have acknowledged the mention, this one the reply, at the same moment."""
        waits_left = MENTION_WAIT_TRIES if inbox_id is not None else 0
        while True:
            verdict, conv = await self._db.run_first(
                queries.accept_inbound,
                message.event_id,
                key,
                mentions_bot=message.mentions_bot,
                direct=message.direct,
                inbox_id=inbox_id,
                wait_for_mention=waits_left > 0,
                opening=opening,
            )
            if verdict != "wait":
                return verdict, conv
            waits_left -= 1
            await asyncio.sleep(MENTION_WAIT_S)

    async def _busy(self, message: InboundMessage, inbox_id: int | None) -> DispatchOutcome:
        """Too many runs at once (CHATOPS_MAX_ACTIVE_RUNS): say so in the thread, start none."""
        log.warning(
            "busy: %d runs active; not starting one for %s", len(self._active), message.thread
        )
        return await self._refusals.refuse(message, inbox_id, BUSY_NOTICE, kind="busy")

    async def _limited(
        self, message: InboundMessage, inbox_id: int | None, full: PersonalLimitReached
    ) -> DispatchOutcome:
        """The author has as many unfinished runs as one person may (counted in the database,
        every process's): say so in the thread, start none; other people are unaffected."""
        log.warning(
            "user %s has %d unfinished runs (the per-user cap); not starting one in %s",
            message.user_id, full.limit, message.thread,
        )  # fmt: skip
        notice = runs_limit_notice(full.limit)
        return await self._refusals.refuse(
            message, inbox_id, notice, kind="limited", mention=(message.user_id,)
        )

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
        if run.checkpoint is None and run.status != RunStatus.RUNNING:
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

    async def end_workspace(self, platform: str, workspace: str) -> int:
        """A workspace removed the app: cancel every active run of its threads here (their
        pending approvals end as cancelled); how many were."""
        threads = [
            a.thread
            for a in list(self._active.values())
            if a.thread.platform == platform and a.thread.workspace == workspace
        ]
        ended = [await self.cancel(thread) for thread in threads]
        return sum(ended)

    async def wait_idle(self, timeout: float) -> None:  # noqa: ASYNC109 - agreed API
        """Wait until no run is active (tests and graceful shutdown)."""

        async def _idle() -> None:
            async with self._changed:
                await self._changed.wait_for(lambda: not self._active)

        await asyncio.wait_for(_idle(), timeout)

    async def release(self, active: ActiveRun) -> None:
        self._forget(active)
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
            # free the thread before anything else runs: a reply dispatched after the run's
            # last look at its replies must start a run, not queue on this finished one
            self._forget(active)
            await asyncio.shield(self.release(active))

    def _forget(self, active: ActiveRun) -> None:
        if self._active.get(active.conversation_id) is active:
            del self._active[active.conversation_id]
