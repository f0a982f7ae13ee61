"""Scheduled audit reports: APScheduler (AsyncIOScheduler) with its job store in the bot's
database, so the schedule survives restarts.

`CHATOPS_AUDIT_SCHEDULE` is a crontab line in UTC (`0 9 * * MON`), `CHATOPS_AUDIT_CHANNELS` a
comma list of `platform:channel` (`slack:C0123,feishu:oc_abc`). Each firing reports on the time
since the previous firing and posts it through the surface of each channel's platform
(`post_audit_report(channel, report)`).

Several bot processes share the job store, and APScheduler 3 does not lock a due job between
processes, so each firing first claims (job id, fire time) in `scheduled_report_run`
(`bot/audit/store.py`); only the process whose insert succeeds posts.

The job function is stored by reference (`bot.audit.schedule:run_audit_job`) and its live
collaborators (database, surfaces) are never pickled: `AuditJobExecutor`, owned by this
scheduler, hands them to the function when it runs.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, Protocol

from aiohttp import web
from apscheduler.events import EVENT_JOB_ERROR, EVENT_JOB_EXECUTED, JobExecutionEvent
from apscheduler.executors.base import BaseExecutor
from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.cron import CronTrigger
from sqlalchemy import Engine

from bot.audit.report import AuditQuery, AuditReport, build_report
from bot.audit.store import claim_run, ensure_audit_schema, previous_run
from bot.config import Settings
from bot.errors import StartupError

log = logging.getLogger(__name__)

AUDIT_JOB_ID = "audit-report"
JOBS_TABLE = "apscheduler_jobs"
EXECUTOR = "audit"
MAX_WINDOW = timedelta(days=31)
MISFIRE_GRACE_S = 3600


class AuditPoster(Protocol):
    """What a surface offers for scheduled reports (Slack and Feishu implement it)."""

    async def post_audit_report(self, channel: str, report: AuditReport) -> Any: ...


def parse_schedule(schedule: str) -> CronTrigger:
    """A crontab line (UTC) as a trigger; ValueError naming the setting when it is wrong."""
    try:
        return CronTrigger.from_crontab(schedule.strip(), timezone=UTC)
    except ValueError as exc:
        raise ValueError(
            f"CHATOPS_AUDIT_SCHEDULE {schedule!r} is not a crontab line: {exc}"
        ) from None


def parse_channels(channels: Sequence[str]) -> list[tuple[str, str]]:
    """`slack:C0123` entries as (platform, channel); ValueError naming a malformed entry."""
    parsed = []
    for entry in channels:
        platform, sep, channel = entry.partition(":")
        if not sep or not platform.strip() or not channel.strip():
            raise ValueError(
                f"CHATOPS_AUDIT_CHANNELS entry {entry!r} is not platform:channel "
                "(e.g. slack:C0123 or feishu:oc_abc)"
            )
        parsed.append((platform.strip().lower(), channel.strip()))
    return parsed


@dataclass(frozen=True)
class FireOutcome:
    """What one process did for one firing: posted, or skipped (another process claimed it)."""

    job_id: str
    fire_time: datetime
    status: Literal["posted", "skipped"]
    posted_to: tuple[str, ...] = ()
    failed: tuple[str, ...] = ()


class AuditReportService:
    """Runs one firing: claim it, build the report for the window, post to every channel."""

    def __init__(
        self,
        engine: Engine,
        surfaces: Mapping[str, AuditPoster],
        *,
        worker_id: str = "",
        on_outcome: Callable[[FireOutcome], None] | None = None,
    ) -> None:
        self.engine = engine
        self.surfaces = surfaces  # read at fire time: surfaces may register after start-up
        self.worker_id = worker_id or f"{socket.gethostname()}:{os.getpid()}:{id(self):x}"
        self._on_outcome = on_outcome

    def window_start(self, job_id: str, fire_time: datetime, schedule: str) -> datetime:
        """Since the previous firing, or one schedule period back (at most 31 days)."""
        previous = previous_run(self.engine, job_id, fire_time)
        if previous is None or fire_time - previous > MAX_WINDOW:
            nxt = parse_schedule(schedule).get_next_fire_time(
                None, fire_time + timedelta(seconds=1)
            )
            period = (nxt - fire_time) if nxt is not None else MAX_WINDOW
            return fire_time - min(period, MAX_WINDOW)
        return previous

    async def fire(
        self, job_id: str, fire_time: datetime, *, channels: Sequence[str], schedule: str
    ) -> FireOutcome:
        claimed = await asyncio.to_thread(claim_run, self.engine, job_id, fire_time, self.worker_id)
        if not claimed:
            log.info("audit report %s at %s already claimed by another process", job_id, fire_time)
            return self._done(FireOutcome(job_id, fire_time, "skipped"))
        since = await asyncio.to_thread(self.window_start, job_id, fire_time, schedule)
        # posted in channels: direct messages' calls are counted, their arguments left out
        query = AuditQuery(since=since, until=fire_time, hide_direct=True)
        report = await asyncio.to_thread(build_report, self.engine, query)
        posted, failed = [], []
        for platform, channel in parse_channels(channels):
            surface = self.surfaces.get(platform)
            target = f"{platform}:{channel}"
            if surface is None:
                log.warning("audit report: no %s surface for %s", platform, target)
                failed.append(target)
                continue
            try:
                await surface.post_audit_report(channel, report)
            except Exception:  # noqa: BLE001 - one failing channel must not stop the others
                log.exception("audit report: posting to %s failed", target)
                failed.append(target)
            else:
                posted.append(target)
        return self._done(FireOutcome(job_id, fire_time, "posted", tuple(posted), tuple(failed)))

    def _done(self, outcome: FireOutcome) -> FireOutcome:
        if self._on_outcome is not None:
            self._on_outcome(outcome)
        return outcome


async def run_audit_job(
    *,
    channels: Sequence[str],
    schedule: str,
    service: AuditReportService | None = None,
    job_id: str = AUDIT_JOB_ID,
    fire_time: datetime | None = None,
) -> FireOutcome:
    """The stored job function (its stored kwargs: channels, schedule). `AuditJobExecutor`
    adds the live service and the fire time when it runs it."""
    if service is None or fire_time is None:
        raise RuntimeError("run_audit_job runs under AuditJobExecutor (service and fire_time)")
    return await service.fire(job_id, fire_time, channels=channels, schedule=schedule)


class AuditJobExecutor(BaseExecutor):
    """Runs audit jobs on the event loop with the service injected (not pickled with the job).

    Coalesced firings run once, for the latest missed time; a firing later than the job's
    misfire grace time is skipped, as APScheduler's own executors do.
    """

    def __init__(self, service: AuditReportService) -> None:
        super().__init__()
        self.service = service
        self.tasks: set[asyncio.Task[None]] = set()

    def _do_submit_job(self, job: Any, run_times: list[datetime]) -> None:
        task = asyncio.get_running_loop().create_task(self._run(job, run_times))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _run(self, job: Any, run_times: list[datetime]) -> None:
        events = []
        try:
            for run_time in run_times:
                late = datetime.now(UTC) - run_time
                grace = job.misfire_grace_time
                if grace is not None and late > timedelta(seconds=grace):
                    log.warning("audit job %s missed its %s run by %s", job.id, run_time, late)
                    continue
                retval = await job.func(
                    *job.args, **job.kwargs, service=self.service, job_id=job.id, fire_time=run_time
                )
                events.append(
                    JobExecutionEvent(
                        EVENT_JOB_EXECUTED, job.id, job._jobstore_alias, run_time, retval=retval
                    )
                )
        except Exception as exc:  # noqa: BLE001 - logged, and dispatched as APScheduler does
            log.exception("audit job %s failed", job.id)
            events.append(
                JobExecutionEvent(
                    EVENT_JOB_ERROR, job.id, job._jobstore_alias, run_times[-1], exception=exc
                )
            )
        self._run_job_success(job.id, events)  # frees the instance slot, dispatches the events

    def shutdown(self, wait: bool = True) -> None:
        for task in self.tasks:
            task.cancel()

    async def drain(self) -> None:
        """Wait for running firings (cancelled by `shutdown`) to finish."""
        if self.tasks:
            await asyncio.gather(*self.tasks, return_exceptions=True)


class AuditScheduler:
    """The app's scheduler: owns the APScheduler instance, its executor and the audit job.

    `start()` (inside the running loop) creates the claim table and indexes, starts APScheduler
    and adds, updates or removes the audit job to match the settings; an unchanged job keeps
    its stored next run time, so a restart neither skips nor repeats a firing.
    """

    def __init__(
        self,
        settings: Settings,
        engine: Engine,
        surfaces: Mapping[str, AuditPoster],
        *,
        worker_id: str = "",
        on_outcome: Callable[[FireOutcome], None] | None = None,
    ) -> None:
        self.settings = settings
        self.engine = engine
        self.service = AuditReportService(
            engine, surfaces, worker_id=worker_id, on_outcome=on_outcome
        )
        self.executor = AuditJobExecutor(self.service)
        self.scheduler = AsyncIOScheduler(
            jobstores={"default": SQLAlchemyJobStore(engine=engine, tablename=JOBS_TABLE)},
            executors={EXECUTOR: self.executor},
            job_defaults={
                "coalesce": True,
                "max_instances": 1,
                "misfire_grace_time": MISFIRE_GRACE_S,
            },
            timezone=UTC,
        )

    @property
    def schedule(self) -> str:
        return self.settings.chatops_audit_schedule.strip()

    async def start(self) -> None:
        channels = self.settings.audit_channels
        trigger = parse_schedule(self.schedule) if self.schedule else None
        parse_channels(channels)
        await asyncio.to_thread(ensure_audit_schema, self.engine)
        self.scheduler.start()
        self._sync_job(trigger, channels)  # a few short queries, like APScheduler's own

    def _sync_job(self, trigger: CronTrigger | None, channels: list[str]) -> None:
        existing = self.scheduler.get_job(AUDIT_JOB_ID)
        if trigger is None or not channels:
            if existing is not None:
                self.scheduler.remove_job(AUDIT_JOB_ID)
            if trigger is not None:
                log.warning("CHATOPS_AUDIT_SCHEDULE is set but CHATOPS_AUDIT_CHANNELS is empty")
            return
        kwargs = {"channels": list(channels), "schedule": self.schedule}
        if (
            existing is not None
            and str(existing.trigger) == str(trigger)
            and (dict(existing.kwargs) == kwargs)
        ):
            return
        self.scheduler.add_job(
            run_audit_job,
            trigger,
            id=AUDIT_JOB_ID,
            name="scheduled audit report",
            executor=EXECUTOR,
            kwargs=kwargs,
            replace_existing=True,
        )

    def next_run_time(self) -> datetime | None:
        job = self.scheduler.get_job(AUDIT_JOB_ID)
        return None if job is None else job.next_run_time

    async def close(self) -> None:
        """Stop firing and cancel running firings (a claimed, unposted firing is not retried)."""
        if self.scheduler.running:
            self.scheduler.shutdown(wait=False)
        self.executor.shutdown()
        await self.executor.drain()


class RegisteredSurfaces(Mapping[str, AuditPoster]):
    """The app's registered surfaces that can post audit reports, looked up at fire time
    (surfaces register while the app starts, possibly after the scheduler)."""

    def __init__(self, run_manager: Any) -> None:
        self._run_manager = run_manager

    def _posters(self) -> dict[str, AuditPoster]:
        found: Mapping[str, Any] = self._run_manager.surfaces()
        return {k: v for k, v in found.items() if hasattr(v, "post_audit_report")}

    def __getitem__(self, platform: str) -> AuditPoster:
        return self._posters()[platform]

    def __iter__(self) -> Iterator[str]:
        return iter(self._posters())

    def __len__(self) -> int:
        return len(self._posters())


class AuditSchedulerContext:
    """The app's `cleanup_ctx` entry: starts the audit scheduler, stops it at shutdown.

    Started even without a schedule, so a schedule removed from the settings removes the
    stored job, and the audit indexes exist for chat and tool reports. `.scheduler` is built
    up front (no I/O), so tests and the app can reach it.
    """

    def __init__(self, runtime: Any) -> None:
        self.scheduler = AuditScheduler(
            runtime.settings, runtime.engine, RegisteredSurfaces(runtime.run_manager)
        )

    async def __call__(self, app: web.Application) -> AsyncIterator[None]:
        try:
            await self.scheduler.start()
        except ValueError as exc:
            raise StartupError(str(exc)) from None
        try:
            yield
        finally:
            await self.scheduler.close()


def scheduler_context(runtime: Any) -> AuditSchedulerContext:
    """What `bot.server` appends to `app.cleanup_ctx`."""
    return AuditSchedulerContext(runtime)
