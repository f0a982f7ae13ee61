"""Scheduled audit reports: APScheduler (AsyncIOScheduler) with its job store in the bot's
database, so the schedule survives restarts.

`CHATOPS_AUDIT_SCHEDULE` is a crontab line in UTC (`0 9 * * MON`), `CHATOPS_AUDIT_CHANNELS` a
comma list of `platform:channel` (`slack:C0123,feishu:oc_abc`). Each firing reports on the time
since the previous firing and posts it through the surface of each channel's platform
(`post_audit_report(channel, report)`).

Several bot processes share the job store, and APScheduler 3 does not lock a due job between
processes, so each firing first claims (job id, fire time) in `scheduled_report_run`
(`bot/storage/audit.py`); only the process whose insert succeeds posts.

The stored job is only a due marker (`bot.audit.schedule:audit_report_due`, by reference, with
its channels and schedule as kwargs): APScheduler's own AsyncIO executor runs it, applying the
misfire grace time, coalescing and max instances, and the scheduler's EVENT_JOB_EXECUTED
listener then runs the firing for its scheduled time with the live collaborators (database,
surfaces), which are never pickled. Only APScheduler 3's public API is used.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from aiohttp import web
from apscheduler.events import EVENT_JOB_EXECUTED, JobExecutionEvent
from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.cron import CronTrigger

from bot.audit.report import AuditQuery, report_for
from bot.chat.surface import AuditReportPoster, Surface
from bot.config import Settings
from bot.errors import StartupError
from bot.storage.audit import claim_report_run, previous_report_run
from bot.storage.database import Database

log = logging.getLogger(__name__)

AUDIT_JOB_ID = "audit-report"
JOBS_TABLE = "apscheduler_jobs"
MAX_WINDOW = timedelta(days=31)
MISFIRE_GRACE_S = 3600
_DUE_REF = f"{__name__}:audit_report_due"  # the stored job's function, by reference


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
        db: Database,
        surfaces: Mapping[str, AuditReportPoster],
        *,
        worker_id: str = "",
        on_outcome: Callable[[FireOutcome], None] | None = None,
    ) -> None:
        """`db`: the app's database (the claims go through it; the report: `report_for`)."""
        self.db = db
        self.surfaces = surfaces  # read at fire time: surfaces may register after start-up
        self.worker_id = worker_id or f"{socket.gethostname()}:{os.getpid()}:{id(self):x}"
        self._on_outcome = on_outcome

    async def window_start(self, job_id: str, fire_time: datetime, schedule: str) -> datetime:
        """Since the previous firing, or one schedule period back (at most 31 days)."""
        previous = await self.db.run(previous_report_run, job_id, fire_time)
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
        claimed = await self.db.run(claim_report_run, job_id, fire_time, self.worker_id)
        if not claimed:
            log.info("audit report %s at %s already claimed by another process", job_id, fire_time)
            return self._done(FireOutcome(job_id, fire_time, "skipped"))
        since = await self.window_start(job_id, fire_time, schedule)
        # posted in channels: direct messages' calls are counted, their arguments left out
        query = AuditQuery(since=since, until=fire_time, hide_direct=True)
        report = await report_for(self.db, query)
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


async def audit_report_due(*, channels: Sequence[str], schedule: str) -> dict[str, Any]:
    """The stored job function: says the report is due, with the job's stored arguments.

    It runs under APScheduler's executor (within the misfire grace time, coalesced, one at a
    time); `AuditScheduler` hears EVENT_JOB_EXECUTED and runs the firing itself.
    """
    return {"channels": list(channels), "schedule": schedule}


class AuditScheduler:
    """The app's scheduler: owns the APScheduler instance, its executor and the audit job.

    `start()` (inside the running loop) starts APScheduler and adds, updates or removes the
    audit job to match the settings; an unchanged job keeps its stored next run time, so a
    restart neither skips nor repeats a firing.
    """

    def __init__(
        self,
        settings: Settings,
        db: Database,
        surfaces: Mapping[str, AuditReportPoster],
        *,
        worker_id: str = "",
        on_outcome: Callable[[FireOutcome], None] | None = None,
    ) -> None:
        """`db`: the app's database, migrated (the claim table is in its migrations);
        APScheduler keeps its job store, a table of its own, on the same engine."""
        self.settings = settings
        self.db = db
        self.service = AuditReportService(db, surfaces, worker_id=worker_id, on_outcome=on_outcome)
        self.tasks: set[asyncio.Task[None]] = set()  # firings in flight
        self.scheduler = AsyncIOScheduler(
            jobstores={"default": SQLAlchemyJobStore(engine=db.engine, tablename=JOBS_TABLE)},
            job_defaults={
                "coalesce": True,
                "max_instances": 1,
                "misfire_grace_time": MISFIRE_GRACE_S,
            },
            timezone=UTC,
        )
        self.scheduler.add_listener(self._on_executed, EVENT_JOB_EXECUTED)

    @property
    def schedule(self) -> str:
        return self.settings.chatops_audit_schedule.strip()

    async def start(self) -> None:
        channels = self.settings.audit_channels
        trigger = parse_schedule(self.schedule) if self.schedule else None
        parse_channels(channels)
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
            and existing.func_ref == _DUE_REF
            and str(existing.trigger) == str(trigger)
            and (dict(existing.kwargs) == kwargs)
        ):
            return
        self.scheduler.add_job(
            _DUE_REF,
            trigger,
            id=AUDIT_JOB_ID,
            name="scheduled audit report",
            kwargs=kwargs,
            replace_existing=True,
        )

    def _on_executed(self, event: JobExecutionEvent) -> None:
        """The due marker ran for `event.scheduled_run_time`: fire the report for that time.

        Called by APScheduler on the event loop; a firing still in flight (a slow platform)
        makes this one skipped, as `max_instances=1` did when the firing ran inside the job.
        """
        if event.job_id != AUDIT_JOB_ID or not isinstance(event.retval, dict):
            return
        if self.tasks:
            when = event.scheduled_run_time
            log.warning("audit report at %s skipped: the previous firing is still running", when)
            return
        task = asyncio.get_running_loop().create_task(
            self._fire(event.scheduled_run_time, **event.retval)
        )
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _fire(self, fire_time: datetime, *, channels: Sequence[str], schedule: str) -> None:
        try:
            await self.service.fire(AUDIT_JOB_ID, fire_time, channels=channels, schedule=schedule)
        except Exception:  # noqa: BLE001 - logged; the next firing runs as usual
            log.exception("audit report firing at %s failed", fire_time)

    async def drain(self) -> None:
        """Wait for firings in flight (cancelled by `close`) to finish."""
        if self.tasks:
            await asyncio.gather(*self.tasks, return_exceptions=True)

    def next_run_time(self) -> datetime | None:
        job = self.scheduler.get_job(AUDIT_JOB_ID)
        return None if job is None else job.next_run_time

    async def close(self) -> None:
        """Stop firing and cancel running firings (a claimed, unposted firing is not retried)."""
        if self.scheduler.running:
            self.scheduler.shutdown(wait=False)
        for task in self.tasks:
            task.cancel()
        await self.drain()


class RegisteredSurfaces(Mapping[str, AuditReportPoster]):
    """The app's registered surfaces that can post audit reports, looked up at fire time
    (surfaces register while the app starts, possibly after the scheduler)."""

    def __init__(self, run_manager: Any) -> None:
        self._run_manager = run_manager

    def _posters(self) -> dict[str, AuditReportPoster]:
        found: Mapping[str, Surface] = self._run_manager.surfaces()
        return {k: v.report_poster for k, v in found.items() if v.report_poster is not None}

    def __getitem__(self, platform: str) -> AuditReportPoster:
        return self._posters()[platform]

    def __iter__(self) -> Iterator[str]:
        return iter(self._posters())

    def __len__(self) -> int:
        return len(self._posters())


class AuditSchedulerContext:
    """The app's `cleanup_ctx` entry: starts the audit scheduler, stops it at shutdown.

    Started even without a schedule, so a schedule removed from the settings removes the
    stored job. `.scheduler` is built
    up front (no I/O), so tests and the app can reach it.
    """

    def __init__(self, runtime: Any) -> None:
        self.scheduler = AuditScheduler(
            runtime.settings, runtime.db, RegisteredSurfaces(runtime.run_manager)
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
