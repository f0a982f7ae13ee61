"""One conversation's task: a run from its status message to its answer, then the replies that
arrived too late for it to read, as the next run.

`RunManager` (bot/runs/manager.py) decides when a run starts and owns the tasks; this is what
each task does. Errors end a run as failed and are said in the thread, never raised; every
ending is a conditional transition (`queries.transition_run` / `finish_run`, the endings in
`bot.runs.endings`): a run has one outcome, and only the winner tells the thread. Whatever ends
a run first ends its approvals still pending. The answer streams into the thread as it is
written where the surface can (`bot.runs.answering`); a person's Stop (`bot.runs.stopping`)
ends the run as cancelled and the thread says who stopped it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

from bot.approvals.broker import ApprovalBroker
from bot.chat.events import ApprovalEnded, ApprovalWaiting, Listener, RunEvent
from bot.chat.surface import Surface
from bot.chat.threads import MessageRef
from bot.elicitation.service import Elicitations
from bot.engine.hooks import RunContext
from bot.engine.llm import LLMError
from bot.engine.stopping import RunStopped
from bot.engine.tools import Question, Reply
from bot.observability.context import bind
from bot.observability.metrics import Metrics
from bot.observability.tracing import Tracing, trace_id, traceparent
from bot.redaction import Redactor
from bot.runs.active import ActiveRun, lose
from bot.runs.admission import Admission
from bot.runs.agent import Agent
from bot.runs.answering import AnswerDelivery, answer_files
from bot.runs.deps import Emitter, RunDeps
from bot.runs.emitter import run_emitter
from bot.runs.endings import ANSWERING, TAKEN_OVER, RunEndings
from bot.runs.leases import LeaseKeeper
from bot.runs.mail import deliver_mail
from bot.runs.redacting import RedactingEmit
from bot.runs.status import StatusReporter
from bot.statuses import LIVE_RUN_STATES, RunStatus
from bot.storage import leases as lease_queries
from bot.storage import queries as queries
from bot.storage.database import Database, through_outage
from bot.storage.fencing import Fence
from bot.storage.models import Message, Run

log = logging.getLogger(__name__)

READ_THROUGH = "read_through"  # the checkpoint's newest reply read (a `Message` id)

LIVE = LIVE_RUN_STATES


class ConversationRunner:
    """Runs the runs of one conversation's task; shared by every task of a `RunManager`."""

    def __init__(
        self,
        *,
        db: Database,
        agent: Agent,
        broker: ApprovalBroker,
        surfaces: Mapping[str, Surface],
        listeners: list[Listener],
        closing: Callable[[], bool],
        status_interval_s: float,
        answer_interval_s: float,
        history_limit: int,
        leases: LeaseKeeper,
        redactor: Redactor,
        metrics: Metrics,
        tracing: Tracing,
        admission: Admission,
        questions: Elicitations | None = None,
    ) -> None:
        """`surfaces` and `listeners`: the manager's own (live) collections; `closing`: the
        process is shutting down (a cancelled run is then left to be resumed, not ended);
        `leases`: this process's (a run is advanced only while its lease is ours);
        `redactor`: every secret the process knows, masked in whatever the run shows;
        `metrics`: the runtime's (a run's ending is counted where it is won); `tracing`: a
        "run" span around each run (no-op when traces are off); `admission`: the process's
        seats (a run past them queues, its status saying so)."""
        self._leases = leases
        self._admission = admission
        self._questions = questions  # where a tool's question to the run's people goes
        self._db = db
        self._agent = agent
        self._surfaces = surfaces
        self._listeners = listeners
        self._closing = closing
        self._status_interval = status_interval_s
        self._answer_interval = answer_interval_s
        self._history_limit = history_limit
        self._redactor = redactor
        self._tracing = tracing
        self._endings = RunEndings(
            db=db, broker=broker, leases=leases, redactor=redactor, metrics=metrics
        )

    async def conversation(
        self,
        active: ActiveRun,
        run: Run,
        before_id: int | None,
        resume_from: dict[str, Any] | None,
        status_ref: MessageRef | None,
    ) -> None:
        """Run, then follow up on replies that arrived too late for the run to read them (the
        caller releases the thread after)."""
        while True:
            await self._run_once(active, run, before_id, resume_from, status_ref)
            if active.lost or self._closing():
                return
            await self._take_mail(active, run.id)  # replies other processes received for it
            follow = await self.next_run(active, run.requester)
            if follow is None:
                return
            run, before_id, resume_from, status_ref = follow, None, None, None

    async def next_run(self, active: ActiveRun, requester: str) -> Run | None:
        """The replies nobody read yet (`active.interrupts`) become the conversation's next run
        (stored, and begun on `active`), or None when there are none. `requester`: who asks
        when no reply names an author."""
        leftover = active.interrupts.drain()
        if not leftover:
            return None
        queued = active.queued[-len(leftover) :]
        # the replies the run never read become the next run's query; each author asks
        authors = [item.author for item in leftover if item.author]
        active.first_requesters = tuple(dict.fromkeys(authors))
        # the history is the whole thread minus the replies that become the query
        active.not_history = {message_id for _, message_id in queued if message_id}
        active.queued.clear()
        run = await self._db.run(
            queries.add_run,
            queries.new_run(
                conversation_id=active.conversation_id,
                requester=authors[0] if authors else requester,
                query="\n".join(item.text for item in leftover),
                owner=self._leases.me,
                request_message_id=max(active.not_history, default=None),
            ),
            self._leases.lease_s,
        )
        active.begin(run.id, *authors)
        return run

    async def _requeue_unread(
        self, active: ActiveRun, run: Run, resume_from: dict[str, Any] | None
    ) -> int | None:
        """A run resumed or taken over: the replies stored for it after the newest it had read
        (by its checkpoint; without one, after its request) are its interrupts again, else a
        restart would drop them unread. Returns the newest reply read before this task."""
        if resume_from is not None:
            floor = resume_from.get(READ_THROUGH, run.request_message_id)
        elif run.lease_epoch > 0:  # taken over before its first checkpoint: read nothing yet
            floor = run.request_message_id
        else:  # begun here: its replies are in its queue already
            return run.request_message_id
        if floor is None:  # a run of an older version: what it read is not known
            return None
        replies = await self._db.run(queries.replies_after, active.conversation_id, floor)
        queued = len(active.queued)
        active.queue_replies([(r.author, r.text, r.id) for r in replies])
        if (again := len(active.queued) - queued) > 0:
            log.info("run %s: %d unread repl%s read again", run.id, again,
                     "y" if again == 1 else "ies")  # fmt: skip
        return floor

    async def _take_mail(self, active: ActiveRun, run_id: str) -> None:
        """Replies to this run that reached another process (`run_mail`) join the interrupts
        (one taker per reply: the owner, or the sender taking it back)."""
        mail = await self._db.run(lease_queries.take_mail, [run_id], self._leases.me)
        deliver_mail(active, mail)

    async def _run_once(
        self,
        active: ActiveRun,
        run: Run,
        before_id: int | None,
        resume_from: dict[str, Any] | None,
        status_ref: MessageRef | None,
    ) -> None:
        """One run inside its "run" span: the trace it stored if it has one (resumed, adopted),
        else a new one, stored on the run for whoever continues it."""
        with self._tracing.run_span(
            run_id=run.id, conversation_id=active.conversation_id,
            platform=active.thread.platform, trace_parent=run.trace_parent,
        ) as span:  # fmt: skip
            bind(trace_id=trace_id(span))  # on every line the run logs (None: traces off)
            if run.trace_parent is None and (parent := traceparent(span)) is not None:
                run.trace_parent = parent
                try:
                    await self._db.run(queries.update_run, run.id, trace_parent=parent)
                except Exception:  # noqa: BLE001 - a trace is never worth a run: it goes on
                    log.warning("run %s: its trace context could not be stored", run.id)
            thread = active.thread
            # a run begins here unless it resumes a checkpoint or was taken over (its epoch
            # raised): one that began elsewhere was counted, and timed, where it began
            fresh = resume_from is None and run.lease_epoch == 0
            with self._endings.tracking(run.id, thread.platform, thread.workspace, fresh=fresh):
                await self._run_steps(active, run, before_id, resume_from, status_ref)

    async def _run_steps(
        self,
        active: ActiveRun,
        run: Run,
        before_id: int | None,
        resume_from: dict[str, Any] | None,
        status_ref: MessageRef | None,
    ) -> None:
        """One run from status message to answer; errors end it as failed, never raise."""
        thread = active.thread
        bind(conversation_id=active.conversation_id, run_id=run.id)  # on every line it logs
        log.info("run %s %s for %s in %s", run.id, "resumed" if resume_from else "started",
                 run.requester, thread.platform)  # fmt: skip
        surface = self._surfaces.get(thread.platform)
        if surface is None:
            no_surface = f"no surface for {thread.platform!r}"
            await self._endings.end_run(run, RunStatus.FAILED, error=no_surface)
            log.error("run %s: no surface registered for %s", run.id, thread.platform)
            return
        interval = surface.status_edit_interval_s  # the console takes every step at once
        reporter = StatusReporter(
            surface, thread,
            min_interval_s=self._status_interval if interval is None else interval,
            run_id=run.id, requester=run.requester, title=self._redactor.known_text(run.query),
            tool_secrets=lambda _tool: self._redactor.secrets(),
        )  # fmt: skip
        delivery = AnswerDelivery(
            surface, thread, run_id=run.id, recipient=run.requester,
            interval_s=self._answer_interval,
        )  # fmt: skip
        if resume_from is not None:  # adopted or resumed: the steps done so far show again
            reporter.restore(resume_from.get("steps") or ())
        fence = self._leases.fence(run)
        seat = self._admission.ask()
        if seat.queued:
            reporter.queue(seat.ahead)
        try:
            ref = await reporter.open(status_ref)
            if status_ref is None:
                await self._db.run(queries.update_run, run.id, status_message_id=ref.message_id)
            if seat.queued:
                await active.stop.race(seat.wait())
                reporter.admit()
            # a thread made with this run's mention has nothing before it (no query to ask);
            # a follow-up run of it reads the thread as usual
            first, active.new_thread = active.new_thread, False
            unread = resume_from is not None or first
            history, authors = ([], ()) if unread else await self._history(active, before_id)
            read_floor = await self._requeue_unread(active, run, resume_from)

            def on_event(event: RunEvent) -> None:
                if isinstance(event, ApprovalWaiting):  # waiting for a person: no seat needed
                    seat.step_out()
                elif isinstance(event, ApprovalEnded):
                    seat.step_in()
                reporter.on_event(event)
                delivery.on_event(event)

            emit = RedactingEmit(
                run_emitter(run.id, on_event, self._listeners, surface, thread), self._redactor
            )

            async def checkpoint(state: dict[str, Any]) -> None:
                # with the newest reply read so far: one resumed from it reads those after
                state = {**state, READ_THROUGH: active.read_through(read_floor)}
                if not await self._db.run(
                    queries.update_run, run.id, fence=fence, checkpoint=state
                ):
                    lose(active, f"run {run.id}: its checkpoint was refused (lease lost)")

            result = await self._agent.run(
                run.query,
                history=history,
                context=self._run_context(
                    active, run, emit, authors, resumed=resume_from is not None, fence=fence
                ),
                interrupts=active.interrupts,
                emit=emit,
                on_checkpoint=checkpoint,
                resume_from=resume_from,
                stop=active.stop,
                connectors=run.connectors,
            )
            if result.failure is not None:  # the model failed: the run failed, no answer
                raise result.failure
            await delivery.open()
            answer = await active.stop.race(self._agent.synthesize(result, emit=emit))
            seat.leave()  # what is left is delivery, paced by the platform, not work
            answer = self._redactor.known_text(answer)  # as its stream showed it
            usage = {
                "iterations": result.iterations,
                "prompt_tokens": result.usage.prompt_tokens,
                "completion_tokens": result.usage.completion_tokens,
            }
            # the answer is stored before it is posted: a stop in between is finished at
            # start-up by posting it, never by telling the thread the run failed
            # (and only if nobody pressed Stop meanwhile: a stop and the answer, one outcome);
            # a database outage is waited out: the answer is ready
            if not await through_outage(
                lambda: self._db.run(
                    queries.transition_run, run.id, ANSWERING, current=LIVE, unless_stopped=True,
                    fence=fence, answer=answer, **usage,
                ),
                f"storing the answer of run {run.id}",
            ):  # fmt: skip
                row = await self._db.run(queries.get_run, run.id)
                if row is not None and row.stopped_by and row.status in LIVE:
                    raise RunStopped(row.stopped_by)
                log.warning("run %s ended elsewhere; its answer is not posted", run.id)
                await delivery.abandon(TAKEN_OVER)  # what streamed is not the run's answer
                await reporter.close()
                return
            log.info("run %s answering after %d iterations (%d prompt + %d completion tokens)",
                     run.id, result.iterations, result.usage.prompt_tokens,
                     result.usage.completion_tokens)  # fmt: skip
            reply = queries.new_message(
                conversation_id=active.conversation_id, role="assistant", text=answer
            )
            posting = asyncio.ensure_future(
                self._endings.post_answer(run, delivery, answer_files(result.artifacts), reply)
            )
            try:
                answered = await asyncio.shield(posting)
            except asyncio.CancelledError:
                if active.lost and not self._closing():
                    # the lease lapsed while the answer goes out: the adopter waits for its
                    # message to be recorded, so it is posted and recorded, not cut short
                    try:
                        await posting
                    except Exception:  # noqa: BLE001 - the adopter posts it after its wait
                        log.warning("run %s: its answer could not be posted", run.id, exc_info=True)
                    await reporter.close()
                else:
                    posting.cancel()
                raise
            if not answered:
                await reporter.close()
                return
            await reporter.finish(
                RunStatus.DONE, headline="Done", iterations=result.iterations, usage=result.usage
            )
        except RunStopped as stopped:
            await self._endings.stopped(run, reporter, delivery, surface, thread, stopped.by)
        except asyncio.CancelledError:
            # shutdown, or the lease went to another process: leave the run as it is, for
            # whoever continues it
            if self._closing() or active.lost:
                # whoever continues the run answers it: a half-streamed answer says so
                await asyncio.shield(delivery.abandon(TAKEN_OVER))
                await reporter.close()
                raise
            await asyncio.shield(self._endings.cancelled(run, reporter, delivery))
            raise
        except LLMError as exc:  # the model: its own clear words, no traceback
            log.warning("run %s failed: %s", run.id, exc)
            await self._endings.failed(run, reporter, delivery, (surface, thread), exc)
        except Exception as exc:  # noqa: BLE001 - a run's failure is reported, never a crash
            log.exception("run %s failed", run.id)
            await self._endings.failed(run, reporter, delivery, (surface, thread), exc)
        finally:
            seat.leave()

    async def _history(
        self, active: ActiveRun, before_id: int | None
    ) -> tuple[list[dict[str, str]], tuple[str, ...]]:
        """The thread's earlier messages for a new run, and the authors of the user messages
        among them: the model reads what they wrote, so they are requesters too."""
        rows: Sequence[Message] = await self._db.run(
            queries.thread_history,
            active.conversation_id,
            before_id=before_id,
            limit=self._history_limit + len(active.not_history),
        )
        kept = [m for m in rows if m.id not in active.not_history][-self._history_limit :]
        history = [{"role": m.role, "content": m.text} for m in kept]
        authors = tuple(dict.fromkeys(m.author for m in kept if m.role == "user" and m.author))
        return history, authors

    async def _ask(
        self, active: ActiveRun, question: Question, requesters: tuple[str, ...]
    ) -> Reply:
        """A tool's question in the run's thread; a stop cancels it (its form says so)."""
        assert self._questions is not None
        try:
            return await active.stop.race(self._questions.ask(active.thread, question, requesters))
        except RunStopped:
            return Reply("cancel")

    def _run_context(
        self,
        active: ActiveRun,
        run: Run,
        emit: Emitter,
        history_authors: Sequence[str],
        *,
        resumed: bool,
        fence: Fence,
    ) -> RunContext[RunDeps]:
        thread = active.thread
        first, active.first_requesters = active.first_requesters, ()
        active.people.update(first, history_authors)  # they may stop it too
        run_id = run.id

        def read(authors: tuple[str, ...]) -> None:
            """The engine drained these authors' replies: they may stop the run from now on."""
            if active.run_id == run_id:
                active.people.update(authors)

        return RunContext(
            run_id=run.id,
            requester=run.requester,
            requesters=tuple(dict.fromkeys((*first, *history_authors))),
            conversation_id=active.conversation_id,
            platform=thread.platform,
            workspace=thread.workspace,
            channel=thread.channel,
            direct=active.direct,
            deps=RunDeps(
                thread=thread,
                emit=emit,
                resumed=resumed,
                fence=fence,
                lost=lambda why: lose(active, f"run {run.id}: {why}"),
            ),
            on_read=read,
            ask=None if self._questions is None else partial(self._ask, active),
        )
