"""A thread's conversation row is made once, however many first messages race for it: the
insert skips a row another transaction made meanwhile (ON CONFLICT DO NOTHING on the unique
key) and reads that one, with no savepoint and no IntegrityError."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import create_engine, event
from sqlmodel import Session, select

from bot.storage import queries
from bot.storage.models import Conversation

pytestmark = pytest.mark.both_databases


def test_a_first_message_racing_another_gets_the_row_the_other_made(database_url: str) -> None:
    engine = create_engine(database_url)
    try:
        with Session(engine) as first:
            made = queries.get_or_create_conversation(first, "slack", "T1", "C1", "9.0").id
            # `first` holds its new row uncommitted: the second insert waits for it
            got: list[int | None] = []

            def second() -> None:
                with Session(engine) as other:
                    conv = queries.get_or_create_conversation(other, "slack", "T1", "C1", "9.0")
                    got.append(conv.id)
                    other.commit()

            racer = threading.Thread(target=second)
            racer.start()
            racer.join(0.5)  # it is blocked on the first transaction's row (or lock)
            first.commit()
            racer.join(30)
            assert not racer.is_alive()
        assert got == [made]
        with Session(engine) as session:
            rows = session.exec(select(Conversation).where(Conversation.root == "9.0")).all()
        assert [r.id for r in rows] == [made]
    finally:
        engine.dispose()


def test_a_new_thread_costs_two_statements_and_a_known_one_one(database_url: str) -> None:
    engine = create_engine(database_url)
    statements: list[str] = []
    event.listen(engine, "before_cursor_execute", lambda *a: statements.append(a[2].split()[0]))
    try:
        with Session(engine) as session:
            queries.get_or_create_conversation(session, "slack", "T1", "C1", "8.0")
            assert [s.upper() for s in statements] == ["SELECT", "INSERT"]
            statements.clear()
            queries.get_or_create_conversation(session, "slack", "T1", "C1", "8.0")
            assert [s.upper() for s in statements] == ["SELECT"]
            session.commit()
    finally:
        engine.dispose()


def test_a_mention_opening_a_thread_is_one_statement(database_url: str) -> None:
    """`accept_inbound` (every event from the inbox) inserts a mention's thread without
    looking for it first; a mention in a known thread finds the row the insert skipped."""
    engine = create_engine(database_url)
    statements: list[str] = []
    event.listen(engine, "before_cursor_execute", lambda *a: statements.append(a[2].split()[0]))
    try:
        key = ("slack", "T1", "C1", "7.0")
        with Session(engine) as session:
            verdict, conv = queries.accept_inbound(
                session, "Ev1", key, mentions_bot=True, inbox_id=1
            )
            assert verdict == "ok" and conv is not None and conv.root == "7.0"
            assert [s.upper() for s in statements] == ["INSERT"]
            made = conv.id
            session.commit()
        statements.clear()
        with Session(engine) as session:
            verdict, again = queries.accept_inbound(
                session, "Ev2", key, mentions_bot=True, direct=True, inbox_id=2
            )
            assert verdict == "ok" and again is not None
            assert (again.id, again.direct) == (made, False)  # the row as it was made
            assert [s.upper() for s in statements] == ["INSERT", "SELECT"]
    finally:
        engine.dispose()
