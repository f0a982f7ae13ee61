"""One conversation's task: a run from its status message to its answer, then the replies that
arrived too late for it to read, as the next run.

`RunManager` (bot/runs/manager.py) decides when a run starts and owns the tasks; this is what
each task does. Errors end a run as failed and are said in the thread, never raised; every
ending is a conditional transition (`queries.transition_run` / `finish_run`): a run has one
outcome, and only the winner tells the thread. Whatever ends a run first ends its approvals
still pending. The answer streams into the thread as it is written where the surface can
(`bot.runs.answering`); a person's Stop (`bot.runs.stopping`) ends the run as cancelled and
the thread says who stopped it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from bot.approvals.broker import ApprovalBroker
from bot.engine.hooks import RunContext
from bot.engine.stopping import RunStopped
from bot.redaction import redact_text
from bot.runs.answering import AnswerDelivery
from bot.runs.deps import Emitter, RunDeps
from bot.runs.leases import LeaseKeeper
from bot.runs.status import StatusReporter
from bot.runs.types import ActiveRun, Agent, Listener, RunEvent, answer_files, run_emitter
from bot.storage import leases as lease_queries
from bot.storage import queries as queries
from bot.storage.database import Database
from bot.storage.models import LIVE_RUN_STATES, UNFINISHED_RUN_STATES, Message, Run, RunMail
from bot.surfaces.base import MessageRef, Surface, ThreadRef

log = logging.getLogger(__name__)

LIVE = LIVE_RUN_STATES
ANSWERING = "answering"  # the answer is stored and being posted
UNFINISHED = UNFINISHED_RUN_STATES  # the states the run's own task may end it from


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
        history_limit: int,
        leases: LeaseKeeper,
        secrets: Sequence[str] = (),
    ) -> None:
        """`surfaces` and `listeners`: the manager's own (live) collections; `closing`: the
        process is shutting down (a cancelled run is then left to be resumed, not ended);
        `leases`: this process's (a run is advanced only while its lease is ours);
        `secrets`: known secret values, never shown in a status message's step summaries."""
        self._leases = leases
        self._db = db
        self._agent = agent
        self._broker = broker
        self._surfaces = surfaces
        self._listeners = listeners
        self._closing = closing
        self._status_interval = status_interval_s
        self._history_limit = history_limit
        self._secrets = tuple(secrets)

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
                lease_until=self._leases.until(),
            ),
        )
        active.begin(run.id, *authors)
        return run

    async def _take_mail(self, active: ActiveRun, run_id: str) -> None:
        """Replies to this run that reached another process (`run_mail`) join the interrupts
        (one taker per reply: the owner, or the sender taking it back)."""
        mail = await self._db.run(lease_queries.take_mail, [run_id], self._leases.me)
        deliver_mail(active, mail)

    def _tool_secrets(self, tool_name: str) -> Iterable[str]:
        tool = self._agent.tools.get(tool_name)
        return tool.secret_values() if tool is not None else ()

    async def _run_once(
        self,
        active: ActiveRun,
        run: Run,
        before_id: int | None,
        resume_from: dict[str, Any] | None,
        status_ref: MessageRef | None,
    ) -> None:
        """One run from status message to answer; errors end it as failed, never raise."""
        thread = active.thread
        surface = self._surfaces.get(thread.platform)
        if surface is None:
            await self.end_run(run.id, "failed", error=f"no surface for {thread.platform!r}")
            log.error("run %s: no surface registered for %s", run.id, thread.platform)
            return
        interval = surface.status_edit_interval_s  # the console takes every step at once
        reporter = StatusReporter(
            surface, thread,
            min_interval_s=self._status_interval if interval is None else interval,
            run_id=run.id, requester=run.requester, title=run.query, secrets=self._secrets,
            tool_secrets=self._tool_secrets,
        )  # fmt: skip
        delivery = AnswerDelivery(surface, thread, run_id=run.id, recipient=run.requester)
        if resume_from is not None:  # adopted or resumed: the steps done so far show again
            reporter.restore(resume_from.get("steps") or ())
        me = self._leases.me
        try:
            ref = await reporter.open(status_ref)
            if status_ref is None:
                await self._db.run(queries.update_run, run.id, status_message_id=ref.message_id)
            history, authors = ([], ()) if resume_from else await self._history(active, before_id)

            def on_event(event: RunEvent) -> None:
                reporter.on_event(event)
                delivery.on_event(event)

            emit = run_emitter(run.id, on_event, self._listeners, surface, thread)

            async def checkpoint(state: dict[str, Any]) -> None:
                if not await self._db.run(queries.update_run, run.id, owner=me, checkpoint=state):
                    lose(active, f"run {run.id}: another process holds its lease now")

            result = await self._agent.run(
                run.query,
                history=history,
                context=self._run_context(
                    active, run, emit, authors, resumed=resume_from is not None
                ),
                interrupts=active.interrupts,
                emit=emit,
                on_checkpoint=checkpoint,
                resume_from=resume_from,
                stop=active.stop,
            )
            await delivery.open()
            answer = await active.stop.race(self._agent.synthesize(result, emit=emit))
            usage = {
                "iterations": result.iterations,
                "prompt_tokens": result.usage.prompt_tokens,
                "completion_tokens": result.usage.completion_tokens,
            }
            # the answer is stored before it is posted: a stop in between is finished at
            # start-up by posting it, never by telling the thread the run failed
            # (and only if nobody pressed Stop meanwhile: a stop and the answer, one outcome)
            if not await self._db.run(
                queries.transition_run, run.id, ANSWERING, current=LIVE, unless_stopped=True,
                owner=me, answer=answer, **usage,
            ):  # fmt: skip
                row = await self._db.run(queries.get_run, run.id)
                if row is not None and row.stopped_by and row.status in LIVE:
                    raise RunStopped(row.stopped_by)
                log.warning("run %s ended elsewhere; its answer is not posted", run.id)
                await reporter.close()
                return
            posted = await delivery.deliver(answer, answer_files(result.artifacts))
            await self._db.run(queries.update_run, run.id, answer_message_id=posted.message_id)
            reply = queries.new_message(
                conversation_id=active.conversation_id, role="assistant", text=answer
            )
            await self.end_run(run.id, "done", reply=reply, current=(ANSWERING,))
            await reporter.finish(
                "done", headline="Done", iterations=result.iterations, usage=result.usage
            )
        except RunStopped as stopped:
            await self._stopped(run, reporter, delivery, surface, thread, stopped.by)
        except asyncio.CancelledError:
            # shutdown, or the lease went to another process: leave the run as it is, for
            # whoever continues it
            if self._closing() or active.lost:
                await reporter.close()
                raise
            await asyncio.shield(self._cancelled(run, reporter, delivery))
            raise
        except Exception as exc:  # noqa: BLE001 - a run's failure is reported, never a crash
            log.exception("run %s failed", run.id)
            await delivery.abandon("(The answer was cut short: the run failed.)")
            await self._failed(run, reporter, surface, thread, exc)

    async def _cancelled(
        self, run: Run, reporter: StatusReporter, delivery: AnswerDelivery
    ) -> None:
        if await self.end_run(run.id, "cancelled"):
            await delivery.abandon("(Cancelled before the answer was finished.)")
            await reporter.finish("cancelled", headline="Cancelled")
        else:
            await reporter.close()

    async def _stopped(
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
            if not await self.end_run(run.id, "cancelled", error=f"stopped by {by}"):
                await reporter.close()
                return
            await delivery.abandon("(Stopped before the answer was finished.)")
            await reporter.finish("cancelled", headline="Stopped")
            await surface.post_notice(thread, "stopped this run.", mention=(by,))
        except Exception:  # noqa: BLE001 - telling the thread must not raise either
            log.exception("could not report that run %s was stopped", run.id)

    async def _failed(
        self,
        run: Run,
        reporter: StatusReporter,
        surface: Surface,
        thread: ThreadRef,
        exc: Exception,
    ) -> None:
        """Mark the run failed and say so in the thread; the exception text stays in the logs."""
        kind = type(exc).__name__
        try:
            error = redact_text(f"{kind}: {str(exc)[:500]}")
            if not await self.end_run(run.id, "failed", error=error):
                await reporter.close()  # it ended otherwise (cancelled, or failed elsewhere)
                return
            await reporter.finish("failed", headline="Failed")
            await surface.post_notice(
                thread, f"Sorry, this run failed ({kind}). Ask again to retry."
            )
        except Exception:  # noqa: BLE001 - reporting the failure must not raise either
            log.exception("could not report the failure of run %s", run.id)

    async def end_run(
        self,
        run_id: str,
        status: str,
        *,
        reply: Message | None = None,
        current: tuple[str, ...] = UNFINISHED,
        **values: Any,
    ) -> bool:
        """End the run if it is still unfinished (or in `current`); False if it had ended.

        Whatever ends a run (done, failed, cancelled) first ends its approvals still pending
        (a call of a parallel batch, a gate that gave up): a card must never outlive its run,
        nor a click on it approve a call nobody will make.
        """
        await self._broker.cancel_run(run_id, reason=f"the run ended ({status})")
        return await self._db.run(
            queries.finish_run, run_id, reply, status=status, current=current,
            owner=self._leases.me, **values,
        )  # fmt: skip

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

    def _run_context(
        self,
        active: ActiveRun,
        run: Run,
        emit: Emitter,
        history_authors: Sequence[str],
        *,
        resumed: bool,
    ) -> RunContext[RunDeps]:
        thread = active.thread
        first, active.first_requesters = active.first_requesters, ()
        active.people.update(first, history_authors)  # they may stop it too
        return RunContext(
            run_id=run.id,
            requester=run.requester,
            requesters=tuple(dict.fromkeys((*first, *history_authors))),
            conversation_id=active.conversation_id,
            platform=thread.platform,
            channel=thread.channel,
            direct=active.direct,
            deps=RunDeps(thread=thread, emit=emit, resumed=resumed),
        )


def deliver_mail(active: ActiveRun, mail: Sequence[RunMail]) -> None:
    """Taken mail becomes the run's interrupts, as a reply received here would."""
    for item in mail:
        active.interrupts.put(item.text, author=item.author)
        active.people.add(item.author)
        active.queued.append((item.author, item.message_id or None))


def lose(active: ActiveRun, why: str) -> None:
    """Another process holds the run's lease: this task stops without ending the run."""
    if active.lost:
        return
    log.warning("%s; this process lets it go", why)
    active.lost = True
    if active.task is not None:
        active.task.cancel()
