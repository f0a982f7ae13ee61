"""The invariants a fault must leave intact, read from the outside (the target system, the
database, the chat thread), shared by tests/faults/ and bench/faults.py:

- every approved call runs at most once: each conversation restarts its own service, so a
  second execution at the target system is a duplicate; so is a second call-log row for one
  `(run_id, tool_call_id)`;
- every acknowledged event gets exactly one outcome: one run, and one answer or failure message
  in its thread;
- no run waits forever: within the bound each run is final, or waits for an approval whose card
  is live;
- nothing acknowledged is lost: an acknowledged mention has its run and its outcome.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from sqlalchemy import create_engine
from sqlmodel import Session, select

from bot.runs.recovery import RESTART_NOTICE
from bot.storage.models import CallLog, Run

FINAL = frozenset({"done", "failed", "cancelled"})
ANSWERED = "is back"  # the model's answer: "<service> is back."
# the thread's failure message: a failed run's notice (`bot.runs.endings.RunEndings.failed`), the
# model's failure included ("Sorry, this run failed: <the endpoint and what to check>.")
FAILED = ("Sorry, this run failed",)
CUT_SHORT = ("was cut short", "before the answer was finished")  # a half answer, marked so
EXECUTED = frozenset({"started", "ok", "error"})  # call-log rows of calls that went out


@dataclass(frozen=True)
class Conversation:
    """One acknowledged mention: `service` is unique to it (in its text and its tool call),
    `thread` is where the platform shows its outcome."""

    service: str
    thread: str


class Threads(Protocol):
    """What a chat platform shows in a thread (FakeSlack, FakeFeishu)."""

    def texts(self, thread: str) -> list[str]: ...

    def live_card(self, thread: str) -> bool: ...


@dataclass
class Verdict:
    conversations: int = 0
    duplicate_executions: int = 0
    duplicate_outcomes: int = 0
    lost_events: int = 0
    stuck_runs: int = 0
    pending: int = 0  # waiting for an approval, with a live card (allowed)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def raise_if_broken(self) -> None:
        if self.problems:
            raise AssertionError("invariants broken:\n  " + "\n  ".join(self.problems))


def outcomes(texts: list[str], service: str) -> list[str]:
    """The messages that end the conversation: its answer, a failure or restart notice (a
    message marked as cut short is not one: the run's ending follows it)."""
    notice = RESTART_NOTICE[:40]
    whole = [t for t in texts if not any(c in t for c in CUT_SHORT)]  # a half answer is none
    failures = [t for t in whole if any(f in t for f in FAILED) or notice in t]
    return [t for t in whole if f"{service} {ANSWERED}" in t] + failures


def read_rows(database_url: str) -> tuple[list[Run], list[CallLog]]:
    engine = create_engine(database_url)
    try:
        with Session(engine) as session:
            runs = list(session.exec(select(Run)).all())
            calls = list(session.exec(select(CallLog)).all())
            session.expunge_all()
            return runs, calls
    finally:
        engine.dispose()


def mentions(service: str) -> Callable[[str], bool]:
    pattern = re.compile(rf"\b{re.escape(service)}\b")
    return lambda text: bool(pattern.search(text))


def judge(
    conversations: list[Conversation],
    threads: Threads,
    executed: Mapping[str, int],
    runs: list[Run],
    calls: list[CallLog],
) -> Verdict:
    """The verdict now. `executed`: how many times the target system ran each service's call."""
    verdict = Verdict(conversations=len(conversations))
    for service, count in sorted(executed.items()):
        if count > 1:
            verdict.duplicate_executions += count - 1
            verdict.problems.append(f"{service}: executed {count} times")
    per_call = Counter((c.run_id, c.tool_call_id) for c in calls if c.result_status in EXECUTED)
    for (run_id, call_id), count in sorted(per_call.items()):
        if count > 1:
            verdict.duplicate_executions += count - 1
            verdict.problems.append(f"run {run_id} call {call_id}: {count} call-log rows")
    for conv in conversations:
        _judge_one(verdict, conv, threads, [r for r in runs if mentions(conv.service)(r.query)])
    return verdict


def _judge_one(verdict: Verdict, conv: Conversation, threads: Threads, runs: list[Run]) -> None:
    name = conv.service
    if not runs:
        verdict.lost_events += 1
        verdict.problems.append(f"{name}: acknowledged, but no run")
        return
    if len(runs) > 1:
        verdict.duplicate_outcomes += 1
        verdict.problems.append(f"{name}: {len(runs)} runs for one event")
    open_runs = [r for r in runs if r.status not in FINAL]
    if open_runs:
        if all(r.status == "waiting_approval" for r in open_runs) and threads.live_card(
            conv.thread
        ):
            verdict.pending += 1
        else:
            verdict.stuck_runs += 1
            verdict.problems.append(f"{name}: run stuck in {[r.status for r in open_runs]}")
        return
    said = threads.texts(conv.thread)
    ended = outcomes(said, name)
    if not ended:
        verdict.lost_events += 1
        verdict.problems.append(f"{name}: run {runs[0].status}, no outcome in the thread: {said}")
    elif len(ended) > 1:
        verdict.duplicate_outcomes += 1
        verdict.problems.append(f"{name}: {len(ended)} outcomes: {ended}")


async def settle(
    database_url: str,
    conversations: list[Conversation],
    threads: Threads,
    executed: Callable[[], Mapping[str, int]],
    *,
    within: float = 60,
) -> Verdict:
    """Wait (at most `within` seconds) until every conversation is final with its outcome,
    and return the verdict then; a run still waiting for its approval with a live card by
    then keeps its invariants (counted as `pending`)."""
    deadline = time.monotonic() + within
    while True:
        runs, calls = await asyncio.to_thread(read_rows, database_url)
        verdict = judge(conversations, threads, executed(), runs, calls)
        if (verdict.ok and not verdict.pending) or time.monotonic() > deadline:
            return verdict
        await asyncio.sleep(0.5)


def counted(items: list[Any]) -> dict[str, int]:
    """Executions by service, from a target system's record of its calls."""
    return dict(Counter(str(item) for item in items))
