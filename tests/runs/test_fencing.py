"""Fenced leases at the storage level, on SQLite and PostgreSQL: a process whose epoch is
stale (another process adopted its run) can neither start a tool call nor checkpoint nor end
the run; a lease lapsed by the database's clock starts nothing; and the database itself
refuses a second start of one (run, tool call), even when the fence is bypassed."""

from __future__ import annotations

import asyncio
import os

import pytest
from sqlalchemy.exc import IntegrityError

from bot.approvals.schema import ApprovalPolicy, policy_metadata
from bot.chat.threads import ThreadRef
from bot.engine.hooks import PreToolUseContext, RunContext
from bot.engine.tools import Tool, ToolResult, fingerprint
from bot.runs.deps import RunDeps
from bot.runs.leases import LeaseKeeper, ProcessIdentity
from bot.storage import leases as lease_queries
from bot.storage import queries
from bot.storage.database import Database
from bot.storage.fencing import Fence, start_call
from bot.storage.models import CallLog, CallStart, Run
from hooks.call_log import CallStartHook

pytestmark = pytest.mark.both_databases  # leases and conditional transitions

SERVED = ("slack",)  # the platforms the adopting process has a surface for


def keeper(db: Database, host: str) -> LeaseKeeper:
    return LeaseKeeper(db, ProcessIdentity(host, os.getpid(), 1), lease_s=15)


def owned_run(db: Database, owner: str, lease_s: float) -> Run:
    """A run `owner` holds at epoch 0, its lease ending `lease_s` from now (database clock)."""
    conv = db.call(queries.get_or_create_conversation, "slack", "T1", "C1", "1.0")
    run = queries.new_run(conversation_id=conv.id, requester="U1", query="q", owner=owner)
    return db.call(queries.add_run, run, lease_s)


def call_row(run_id: str, tool_call_id: str = "call_1") -> CallLog:
    return CallLog(
        run_id=run_id, tool_call_id=tool_call_id, connector="ops", action="restart",
        tool_name="ops__restart", result_status="started",
    )  # fmt: skip


def started_rows(db: Database, run_id: str) -> list[CallLog]:
    return [c for c in db.call(queries.calls_for_run, run_id) if c.result_status == "started"]


def test_the_database_refuses_a_second_start_of_one_call(db: Database) -> None:
    """No fence at all (a missed check): the second start of (run, call_1) is refused and
    leaves no row; another call of the run, and an attempt without an id, still start."""
    run = owned_run(db, "a:1:1", 15)
    assert db.call(start_call, call_row(run.id), None).outcome == "started"
    assert db.call(start_call, call_row(run.id), None).outcome == "duplicate"
    assert db.call(start_call, call_row(run.id, "call_2"), None).outcome == "started"
    assert db.call(start_call, call_row(run.id, ""), None).outcome == "started"
    assert db.call(start_call, call_row(run.id, ""), None).outcome == "started"
    assert sorted(c.tool_call_id for c in started_rows(db, run.id)) == ["", "", "call_1", "call_2"]
    with pytest.raises(IntegrityError):  # and by its key alone, whoever writes the row
        db.call(lambda s: s.add(CallStart(run_id=run.id, tool_call_id="call_1", call_log_id=0)))


async def test_a_stale_epoch_starts_no_call_and_writes_nothing(db: Database) -> None:
    """A's lease lapsed and B adopted the run (epoch 1): A, still at epoch 0, starts no call,
    checkpoints nothing and cannot end the run; B can."""
    a, b = keeper(db, "a"), keeper(db, "b")
    try:
        run = owned_run(db, a.me, -1)  # its lease lapsed by the database's clock
        stale = a.fence(run)
        assert await b.claim(run, set())
        assert run.lease_epoch == 1 and run.owner == b.me
        lost = db.call(start_call, call_row(run.id), stale)
        assert lost.outcome == "lost" and "another process holds its lease" in lost.why
        assert not db.call(queries.update_run, run.id, fence=stale, checkpoint={"x": 1})
        assert not db.call(queries.finish_run, run.id, None, status="failed", fence=stale)
        assert started_rows(db, run.id) == []
        fresh = b.fence(run)
        assert db.call(start_call, call_row(run.id), fresh).outcome == "started"
        assert db.call(queries.update_run, run.id, fence=fresh, checkpoint={"x": 2})
        assert db.call(queries.finish_run, run.id, None, status="done", fence=fresh)
        assert db.call(queries.get_run, run.id).checkpoint == {"x": 2}
    finally:
        await a.close()
        await b.close()


async def test_a_lapsed_lease_starts_nothing_and_hands_the_run_back(db: Database) -> None:
    """Nobody adopted yet, but the owner's lease lapsed by the database's clock: it starts no
    call; the run is handed back (no owner, a new epoch) and any process may adopt it."""
    a = keeper(db, "a")
    try:
        run = owned_run(db, a.me, -1)
        lost = db.call(start_call, call_row(run.id), a.fence(run))
        assert lost.outcome == "lost" and "lapsed" in lost.why
        row = db.call(queries.get_run, run.id)
        assert (row.owner, row.lease_epoch) == (None, 1)
        assert [r.id for r, _ in await a.adoptable(set(), SERVED)] == [run.id]
        assert await a.claim(row, set()) and row.lease_epoch == 2
        assert db.call(start_call, call_row(run.id), a.fence(row)).outcome == "started"
    finally:
        await a.close()


async def test_a_live_lease_set_by_the_database_clock_is_live_to_everyone(db: Database) -> None:
    """A lease is stored and judged by the database: a live one is never adoptable, whatever
    the judging process's own clock says (nothing of the host's clock is in the statement)."""
    a, b = keeper(db, "a"), keeper(db, "b")
    try:
        await a.register()
        run = owned_run(db, a.me, 15)
        assert await b.dead_owners() == set()
        assert await b.adoptable(set(), SERVED) == []
        assert not await b.claim(run, set())
        assert db.call(lease_queries.live_processes) == {a.me}
    finally:
        await a.close()
        await b.close()


def _tool() -> Tool:
    async def invoke(args: dict) -> ToolResult:
        return ToolResult("restarted")

    return Tool(
        name="ops__restart", description="restart", parameters={}, invoke=invoke,
        metadata=policy_metadata(ApprovalPolicy(mutating=True)),
    )  # fmt: skip


async def _noop(_: object) -> None:
    return None


def _pre(run_id: str, fence: Fence, lost: list[str]) -> PreToolUseContext[RunDeps]:
    deps = RunDeps(
        thread=ThreadRef("slack", "T1", "C1", "1.0"), emit=_noop, fence=fence, lost=lost.append
    )
    run = RunContext(run_id=run_id, conversation_id=1, requester="U1", deps=deps)
    tool = _tool()
    return PreToolUseContext(
        tool=tool, tool_call_id="call_1", args={}, fingerprint=fingerprint(tool.name, {}), run=run
    )


async def test_the_call_start_hook_blocks_a_lost_run_and_never_starts_a_call_twice(
    db: Database,
) -> None:
    """Through the hook: the stale holder's call is blocked and its run told it lost the run;
    the adopter's start runs; a repeat of the same start is replayed as outcome unknown."""
    a, b = keeper(db, "a"), keeper(db, "b")
    try:
        run = owned_run(db, a.me, -1)
        stale = a.fence(run)
        assert await b.claim(run, set())
        hook = CallStartHook(db=db)
        lost: list[str] = []
        blocked = await hook(_pre(run.id, stale, lost))
        assert not blocked.allowed and len(lost) == 1 and "call_1" in lost[0]
        [refused] = db.call(queries.calls_for_run, run.id)  # the refused attempt is logged,
        assert refused.result_status == "lost" and "no longer holds the run" in refused.error
        assert db.call(queries.recorded_call, run.id, "call_1") is None  # never replayed
        first, again = await asyncio.gather(
            hook(_pre(run.id, b.fence(run), lost)), hook(_pre(run.id, b.fence(run), lost))
        )
        outcomes = sorted([first.result is None, again.result is None])
        assert outcomes == [False, True]  # one allowed to go out, one replayed
        replayed = first.result or again.result
        assert (
            replayed is not None and replayed.is_error and "outcome is unknown" in replayed.content
        )
        assert len(started_rows(db, run.id)) == 1
        assert db.call(queries.recorded_call, run.id, "call_1").result_status == "started"
    finally:
        await a.close()
        await b.close()
