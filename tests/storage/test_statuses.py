"""Statuses are `StrEnum`s stored as the words they always were (`bot.storage.columns`).

Rows written before the enums (plain words, here written with raw SQL) read back as members;
what is stored is the plain word; a word this version does not know (another version sharing
the database) still reads, as plain text matching no member; a misspelt status is refused.
"""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.exc import StatementError
from sqlmodel import Session

from bot.statuses import ApprovalStatus, RunStatus
from bot.storage import approval_queries, queries
from bot.storage.database import Database
from bot.storage.models import Run


def _stored(session: Session, table: str, row_id: str) -> object:
    return (
        session.connection()
        .execute(text(f"SELECT status FROM {table} WHERE id = :id"), {"id": row_id})
        .scalar_one()
    )


def _write(session: Session, table: str, row_id: str, status: str) -> None:
    session.connection().execute(
        text(f"UPDATE {table} SET status = :status WHERE id = :id"),
        {"status": status, "id": row_id},
    )


async def _run(db: Database) -> Run:
    conv = await db.run(queries.get_or_create_conversation, "slack", "T1", "C1", "1.0")
    run = queries.new_run(conversation_id=conv.id, requester="U1", query="restart api")
    return await db.run(queries.add_run, run)


async def test_a_run_status_is_stored_as_its_word_and_read_as_the_member(db: Database) -> None:
    run = await _run(db)
    moved = await db.run(
        queries.transition_run, run.id, RunStatus.WAITING_APPROVAL, current=(RunStatus.RUNNING,)
    )
    assert moved
    stored = await db.run(_stored, "run", run.id)
    assert stored == "waiting_approval" and type(stored) is str
    read = await db.run(queries.get_run, run.id)
    assert read is not None and read.status is RunStatus.WAITING_APPROVAL


async def test_rows_written_as_plain_words_read_as_members(db: Database) -> None:
    run = await _run(db)
    await db.run(_write, "run", run.id, "done")
    read = await db.run(queries.get_run, run.id)
    assert read is not None and read.status is RunStatus.DONE
    approval = approval_queries.new_approval(
        run_id=run.id, conversation_id=run.conversation_id, tool_call_id="call-1",
        tool_name="ops__restart", fingerprint="fp", expires_at=run.started_at,
    )  # fmt: skip
    await db.run(approval_queries.add_approval, approval)
    await db.run(_write, "approval", approval.id, "expired")
    found = await db.run(approval_queries.get_approval, approval.id)
    assert found is not None and found.status is ApprovalStatus.EXPIRED


async def test_a_word_this_version_does_not_know_still_reads(db: Database) -> None:
    run = await _run(db)
    await db.run(_write, "run", run.id, "paused_by_a_newer_bot")
    read = await db.run(queries.get_run, run.id)
    assert read is not None and read.status == "paused_by_a_newer_bot"
    assert not isinstance(read.status, RunStatus)
    # no status filter matches it: no transition from any known status moves it
    moved = await db.run(queries.transition_run, run.id, RunStatus.FAILED, current=tuple(RunStatus))
    assert not moved


async def test_a_misspelt_status_is_refused_where_it_is_written(db: Database) -> None:
    run = await _run(db)
    with pytest.raises(StatementError, match="finished"):
        misspelt: RunStatus = "finished"  # type: ignore[assignment]
        await db.run(queries.transition_run, run.id, misspelt, current=(RunStatus.RUNNING,))
    stored = await db.run(_stored, "run", run.id)
    assert stored == "running"
