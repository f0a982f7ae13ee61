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
from bot.chat.audit_report import AuditReport
from bot.chat.surface import AuditReportPoster, Surface
from bot.config import Settings
from bot.errors import NotInstalled, StartupError
from bot.storage.audit import claim_report_run, previous_report_run, record_report_outcome
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


@dataclass(frozen=True)
class AuditChannel:
    """Where one scheduled report goes: `platform:channel`, or `platform:workspace:channel`
    (the Slack team or Feishu tenant; a report for a workspace lists only its calls and is
    posted with that workspace's own token)."""

    platform: str
    workspace: str
    channel: str

    def __str__(self) -> str:
        where = f"{self.workspace}:" if self.workspace else ""
        return f"{self.platform}:{where}{self.channel}"


def parse_channels(channels: Sequence[str], *, slack_oauth: bool = False) -> list[AuditChannel]:
    """`slack:C0123` or `slack:T0123:C0123` entries; ValueError naming a malformed entry.
    `slack_oauth`: Slack serves many workspaces (OAuth installs), so a Slack entry must name
    its team: there is no bot token of its own to post with."""
    parsed = []
    for entry in channels:
        platform, sep, rest = entry.partition(":")
        workspace, _, channel = rest.rpartition(":")
        platform, workspace, channel = platform.strip().lower(), workspace.strip(), channel.strip()
        if not sep or not platform or not channel or (":" in rest and not workspace):
            raise ValueError(
                f"CHATOPS_AUDIT_CHANNELS entry {entry!r} is not platform:channel or "
                "platform:workspace:channel (e.g. slack:C0123, slack:T0123:C0123, feishu:oc_abc)"
            )
        if slack_oauth and platform == "slack" and not workspace:
            raise ValueError(
                f"CHATOPS_AUDIT_CHANNELS entry {entry!r} names no Slack workspace: with OAuth "
                f"installs (SLACK_CLIENT_ID) each Slack entry is slack:<team id>:{channel}, "
                "posted with that workspace's token"
            )
        parsed.append(AuditChannel(platform, workspace, channel))
    return parsed


@dataclass(frozen=True)
class FireOutcome:
    """What one process did for one firing: posted, or skipped (another process claimed it);
    `problems`: one line per channel that failed, saying why (no traceback, no secret)."""

    job_id: str
    fire_time: datetime
    status: Literal["posted", "skipped"]
    posted_to: tuple[str, ...] = ()
    failed: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()

    def summary(self) -> str:
        """The firing's record (`scheduled_report_run.outcome`), one line."""
        parts = [f"posted to {', '.join(self.posted_to)}"] if self.posted_to else []
        parts += [f"failed: {problem}" for problem in self.problems]
        return "; ".join(parts) or "no channel"

    def as_json(self) -> dict[str, object]:
        return {
            "fire_time": self.fire_time.isoformat(),
            "posted_to": list(self.posted_to),
            "failed": list(self.problems),
        }


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
        reports: dict[str, AuditReport] = {"": report}
        posted, failed, problems = [], [], []
        for where in parse_channels(channels):
            target = str(where)
            problem = await self._post(where, reports, query)
            if problem is None:
                posted.append(target)
            else:
                log.error("audit report: nothing posted to %s: %s", target, problem)
                failed.append(target)
                problems.append(f"{target}: {problem}")
        outcome = FireOutcome(
            job_id, fire_time, "posted", tuple(posted), tuple(failed), tuple(problems)
        )
        await self.db.run(record_report_outcome, job_id, fire_time, outcome.summary())
        return self._done(outcome)

    async def _post(
        self, where: AuditChannel, reports: dict[str, AuditReport], query: AuditQuery
    ) -> str | None:
        """Post the report for `where` (a workspace's own when it names one); None, or why
        it was not posted."""
        surface = self.surfaces.get(where.platform)
        if surface is None:
            return f"no {where.platform} surface is configured"
        report = reports.get(where.workspace)
        if report is None:
            scoped = query.model_copy(update={"workspace": where.workspace})
            report = reports[where.workspace] = await report_for(self.db, scoped)
        try:
            await surface.post_audit_report(where.channel, report, workspace=where.workspace)
        except NotInstalled:
            return (
                f"the {where.platform} workspace {where.workspace} has no installation "
                "(install the app there, or remove the entry from CHATOPS_AUDIT_CHANNELS)"
            )
        except Exception as exc:  # noqa: BLE001 - one failing channel must not stop the others
            log.warning("audit report: posting to %s failed", where, exc_info=True)
            return f"the {where.platform} API refused it ({type(exc).__name__})"
        return None

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
        self.last_outcome: FireOutcome | None = None  # this process's latest firing (readyz)
        self._on_outcome = on_outcome
        self.service = AuditReportService(db, surfaces, worker_id=worker_id, on_outcome=self._kept)
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

    def _kept(self, outcome: FireOutcome) -> None:
        if outcome.status == "posted":
            self.last_outcome = outcome
        if self._on_outcome is not None:
            self._on_outcome(outcome)

    @property
    def schedule(self) -> str:
        return self.settings.chatops_audit_schedule.strip()

    def check(self) -> None:
        """The schedule and channels as settings (ValueError naming the setting): called when
        the app is built, so `chatops serve` stops before it listens."""
        if self.schedule:
            parse_schedule(self.schedule)
        parse_channels(self.settings.audit_channels, slack_oauth=self.settings.slack_oauth)

    def status(self) -> dict[str, object]:
        """For `/readyz`: the next firing, and what this process's latest firing did."""
        nxt = self.next_run_time() if self.scheduler.running else None
        return {
            "next_run": nxt.isoformat() if nxt else None,
            "last": self.last_outcome.as_json() if self.last_outcome else None,
        }

    async def start(self) -> None:
        channels = self.settings.audit_channels
        trigger = parse_schedule(self.schedule) if self.schedule else None
        parse_channels(channels, slack_oauth=self.settings.slack_oauth)
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
        try:
            self.scheduler.check()
        except ValueError as exc:
            raise StartupError(str(exc)) from None

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
