"""Scheduled audit reports: one post per firing however many bot processes share the database.

The firing is driven deterministically: directly through `AuditReportService.fire` with a
given fire time (two services = two processes), and through two real APScheduler instances on
one job store whose job is made due by setting its stored next run time (the test clock).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

import pytest
from apscheduler.events import EVENT_JOB_MISSED

from bot.audit.report import AuditReport
from bot.audit.schedule import (
    AUDIT_JOB_ID,
    MISFIRE_GRACE_S,
    AuditReportService,
    AuditScheduler,
    FireOutcome,
    RegisteredSurfaces,
    parse_channels,
    parse_schedule,
)
from bot.config import Settings
from bot.storage.console import ConsoleStore
from bot.storage.database import Database, create_db_engine
from bot.surfaces.console.surface import ConsoleSurface
from tests.audit.conftest import NOW, claimed_runs

pytestmark = pytest.mark.both_databases  # one post per firing across processes (a claimed row)

SCHEDULE = "0 12 * * FRI"  # NOW (2026-11-20 12:00 UTC) is a Friday
CHANNELS = ["slack:C_AUDIT", "feishu:oc_audit"]


class RecordingSurface:
    """Stands in for a surface's `post_audit_report` (the Slack and Feishu surfaces test their
    own rendering against their fake servers); records what it was asked to post."""

    def __init__(self, platform: str, fail: bool = False) -> None:
        self.platform = platform
        self.fail = fail
        self.posts: list[tuple[str, AuditReport]] = []

    async def post_audit_report(
        self, channel: str, report: AuditReport, *, workspace: str = ""
    ) -> None:
        if self.fail:
            raise ConnectionError("platform down")
        self.posts.append((channel, report))


class OutcomeLog:
    """Outcomes of firings, with a bounded wait on a predicate (no sleeping)."""

    def __init__(self) -> None:
        self.outcomes: list[FireOutcome] = []
        self._waiters: list[tuple[Callable[[], bool], asyncio.Future[None]]] = []

    def record(self, outcome: FireOutcome) -> None:
        self.outcomes.append(outcome)
        for pred, future in list(self._waiters):
            if not future.done() and pred():
                future.set_result(None)

    async def wait_for(self, pred: Callable[[], bool], timeout: float = 10) -> None:  # noqa: ASYNC109
        if pred():
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((pred, future))
        await asyncio.wait_for(future, timeout)


@pytest.fixture
def second_db(audit_db: Database, database_url: str) -> Iterator[Database]:
    """Another process's view of the same database (its own engine, pool and workers)."""
    engine = create_db_engine(database_url)
    db = Database(engine)
    try:
        yield db
    finally:
        db.close()
        engine.dispose()


def surfaces() -> dict[str, RecordingSurface]:
    return {"slack": RecordingSurface("slack"), "feishu": RecordingSurface("feishu")}


async def test_two_processes_one_firing_one_post(audit_db: Database, second_db: Database) -> None:
    shared = surfaces()
    a = AuditReportService(audit_db, shared, worker_id="proc-a")
    b = AuditReportService(second_db, shared, worker_id="proc-b")
    outcomes = await asyncio.gather(
        a.fire(AUDIT_JOB_ID, NOW, channels=CHANNELS, schedule=SCHEDULE),
        b.fire(AUDIT_JOB_ID, NOW, channels=CHANNELS, schedule=SCHEDULE),
    )
    assert sorted(o.status for o in outcomes) == ["posted", "skipped"]
    posted = next(o for o in outcomes if o.status == "posted")
    assert posted.posted_to == ("slack:C_AUDIT", "feishu:oc_audit") and posted.failed == ()
    assert [c for c, _ in shared["slack"].posts] == ["C_AUDIT"]
    assert [c for c, _ in shared["feishu"].posts] == ["oc_audit"]
    report = shared["slack"].posts[0][1]
    # first firing: one schedule period back (a week), so exactly the seeded week
    assert (report.query.since, report.query.until) == (NOW - timedelta(days=7), NOW)
    assert (report.totals.calls, report.approvals.requested, report.mutating_calls_total) == (
        11,
        6,
        7,
    )
    assert [t for t, _ in claimed_runs(audit_db, AUDIT_JOB_ID)] == [NOW]
    # the same firing again (a late duplicate) posts nothing
    again = await a.fire(AUDIT_JOB_ID, NOW, channels=CHANNELS, schedule=SCHEDULE)
    assert again.status == "skipped" and len(shared["slack"].posts) == 1


async def test_next_firing_covers_the_time_since_the_previous_one(audit_db: Database) -> None:
    shared = surfaces()
    service = AuditReportService(audit_db, shared)
    earlier = NOW - timedelta(days=1, hours=6)
    await service.fire(AUDIT_JOB_ID, earlier, channels=CHANNELS[:1], schedule=SCHEDULE)
    await service.fire(AUDIT_JOB_ID, NOW, channels=CHANNELS[:1], schedule=SCHEDULE)
    second = shared["slack"].posts[1][1]
    assert (second.query.since, second.query.until) == (earlier, NOW)
    assert second.totals.calls == 6  # calls 29h .. 4.8h ago (a 30h window)


async def test_a_failing_or_missing_surface_does_not_stop_the_others(
    audit_db: Database,
) -> None:
    shared = {"slack": RecordingSurface("slack", fail=True), "feishu": RecordingSurface("feishu")}
    service = AuditReportService(audit_db, shared)
    outcome = await service.fire(
        AUDIT_JOB_ID, NOW, channels=[*CHANNELS, "teams:T1"], schedule=SCHEDULE
    )
    assert outcome.posted_to == ("feishu:oc_audit",)
    assert outcome.failed == ("slack:C_AUDIT", "teams:T1")
    assert len(shared["feishu"].posts) == 1


def settings() -> Settings:
    return Settings(chatops_audit_schedule=SCHEDULE, chatops_audit_channels=",".join(CHANNELS))


async def test_two_schedulers_on_one_job_store_post_once(
    audit_db: Database, second_db: Database
) -> None:
    log = OutcomeLog()
    shared = surfaces()
    a = AuditScheduler(settings(), audit_db, shared, worker_id="a", on_outcome=log.record)
    b = AuditScheduler(settings(), second_db, shared, worker_id="b", on_outcome=log.record)
    due = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=1)  # the test clock
    try:
        await a.start()
        a.scheduler.pause()
        first = a.next_run_time()
        assert first is not None and first > due
        a.scheduler.modify_job(AUDIT_JOB_ID, next_run_time=due)
        await b.start()  # same settings: keeps the stored (due) job and fires it
        a.scheduler.resume()
        await log.wait_for(lambda: any(o.status == "posted" for o in log.outcomes))
        # whoever fired first moved the stored next run time on before its task ran, so no
        # later pass can fire `due` again; wait for any firing still in flight
        await asyncio.wait_for(asyncio.gather(a.drain(), b.drain()), 10)
        assert [o.status for o in log.outcomes].count("posted") == 1
        assert len(shared["slack"].posts) == 1 and len(shared["feishu"].posts) == 1
        assert [t for t, _ in claimed_runs(audit_db, AUDIT_JOB_ID)] == [due]
        assert (
            a.next_run_time()
            == b.next_run_time()
            == parse_schedule(SCHEDULE).get_next_fire_time(None, datetime.now(UTC))
        )
    finally:
        await a.close()
        await b.close()


async def test_schedule_survives_restart_and_follows_settings(audit_db: Database) -> None:
    first = AuditScheduler(settings(), audit_db, surfaces())
    await first.start()
    first.scheduler.pause()
    pinned = datetime(2030, 1, 4, 12, 0, tzinfo=UTC)
    first.scheduler.modify_job(AUDIT_JOB_ID, next_run_time=pinned)
    await first.close()

    restarted = AuditScheduler(settings(), audit_db, surfaces())
    await restarted.start()
    restarted.scheduler.pause()
    assert restarted.next_run_time() == pinned  # unchanged settings keep the stored job
    await restarted.close()

    daily = Settings(chatops_audit_schedule="0 9 * * *", chatops_audit_channels="slack:C_AUDIT")
    changed = AuditScheduler(daily, audit_db, surfaces())
    await changed.start()
    changed.scheduler.pause()
    job = changed.scheduler.get_job(AUDIT_JOB_ID)
    assert job is not None and job.kwargs["channels"] == ["slack:C_AUDIT"]
    assert job.next_run_time != pinned and job.next_run_time.hour == 9
    await changed.close()

    off = AuditScheduler(Settings(), audit_db, surfaces())
    await off.start()
    assert off.next_run_time() is None  # schedule unset: the job is removed
    await off.close()


@pytest.mark.parametrize(
    ("schedule", "channels", "message"),
    [
        ("every monday", "slack:C1", "CHATOPS_AUDIT_SCHEDULE 'every monday' is not a crontab"),
        ("0 9 * * MON", "slackC1", "CHATOPS_AUDIT_CHANNELS entry 'slackC1'"),
    ],
)
def test_bad_settings_are_named(schedule: str, channels: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_schedule(schedule)
        parse_channels([c for c in channels.split(",") if c])


class FlakySurfaces(dict):
    """The first lookup fails (as if a surface blew up); later ones find the recorder."""

    def __init__(self) -> None:
        super().__init__(slack=RecordingSurface("slack"))
        self.lookups = 0
        self.changed = asyncio.Event()

    def get(self, platform, default=None):  # type: ignore[override]
        self.lookups += 1
        self.changed.set()
        if self.lookups == 1:
            raise RuntimeError("surface exploded")
        return super().get(platform, default)


async def test_a_failed_firing_does_not_block_the_next(audit_db: Database) -> None:
    flaky = FlakySurfaces()
    one_channel = Settings(chatops_audit_schedule=SCHEDULE, chatops_audit_channels="slack:C1")
    s = AuditScheduler(one_channel, audit_db, flaky)
    first = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=2)
    try:
        await s.start()
        for due in (first, first + timedelta(minutes=1)):
            flaky.changed.clear()
            s.scheduler.pause()
            s.scheduler.modify_job(AUDIT_JOB_ID, next_run_time=due)
            s.scheduler.resume()
            await asyncio.wait_for(flaky.changed.wait(), 10)
            await asyncio.wait_for(s.drain(), 10)
        assert flaky.lookups == 2
        assert len(flaky["slack"].posts) == 1  # the second firing ran despite the first failing
        assert [t for t, _ in claimed_runs(audit_db, AUDIT_JOB_ID)] == [
            first,
            first + timedelta(minutes=1),
        ]
    finally:
        await s.close()


async def test_a_firing_later_than_the_grace_time_is_missed_not_posted(
    audit_db: Database,
) -> None:
    log = OutcomeLog()
    shared = surfaces()
    s = AuditScheduler(settings(), audit_db, shared, on_outcome=log.record)
    missed = asyncio.Event()
    s.scheduler.add_listener(lambda _: missed.set(), EVENT_JOB_MISSED)
    late = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=MISFIRE_GRACE_S + 60)
    try:
        await s.start()
        s.scheduler.pause()
        s.scheduler.modify_job(AUDIT_JOB_ID, next_run_time=late)
        s.scheduler.resume()
        await asyncio.wait_for(missed.wait(), 10)
        await s.drain()
        assert log.outcomes == [] and shared["slack"].posts == []
        assert claimed_runs(audit_db, AUDIT_JOB_ID) == []
    finally:
        await s.close()


def test_reports_go_to_the_surfaces_that_declare_a_poster() -> None:
    class Manager:
        def surfaces(self) -> dict[str, object]:
            return {"slack": slack, "console": ConsoleSurface(store)}

    slack = RecordingSurface("slack")
    slack.report_poster = slack  # type: ignore[attr-defined]
    store = ConsoleStore(Database(create_db_engine("sqlite://")))  # never touched
    registered = RegisteredSurfaces(Manager())
    assert dict(registered) == {"slack": slack}
