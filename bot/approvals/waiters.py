"""The approvals this process waits for: one future per waited tool call, resolved the moment a
decision is known here (a click on this process, a wake-up or the poll for one made on
another), and how many waits each run has (the run goes back to `running` after its last)."""

from __future__ import annotations

import asyncio
from collections import Counter

from bot.approvals import authority
from bot.approvals.types import ApprovalOutcome
from bot.statuses import ApprovalStatus
from bot.storage.models import Approval

WaitKey = tuple[str, str]  # (run id, tool call id): known before the approval's row


class Waiters:
    """Owned by the broker; asyncio only (one event loop)."""

    def __init__(self) -> None:
        self._futures: dict[WaitKey, asyncio.Future[ApprovalOutcome]] = {}
        self._per_run: Counter[str] = Counter()

    def __len__(self) -> int:
        return len(self._futures)

    def future(self, key: WaitKey) -> asyncio.Future[ApprovalOutcome]:
        """The call's future, made on first ask (`open()` asks before the card can be clicked,
        so no decision slips past the waiter)."""
        future = self._futures.get(key)
        if future is None:
            future = asyncio.get_running_loop().create_future()
            self._futures[key] = future
        return future

    def forget(self, key: WaitKey) -> None:
        self._futures.pop(key, None)

    def begin(self, run_id: str) -> None:
        self._per_run[run_id] += 1

    def finish(self, key: WaitKey) -> bool:
        """The call's wait is over (answered or cancelled): forget its future and drop one
        wait of its run; True when it was the run's last (the run may go back to running)."""
        self._futures.pop(key, None)
        run_id = key[0]
        self._per_run[run_id] -= 1
        if self._per_run[run_id] > 0:
            return False
        del self._per_run[run_id]
        return True

    def settle(self, row: Approval) -> bool:
        """Wake the waiter of a decided row; True if one waits here."""
        future = self._futures.get((row.run_id, row.tool_call_id))
        if future is None:
            return False
        if not future.done() and row.status != ApprovalStatus.PENDING:
            future.set_result(authority.outcome(row))
        return True

    def waiting_runs(self) -> list[str]:
        """The runs with a wait not answered yet (the poll re-reads their approvals)."""
        return sorted({run_id for (run_id, _), f in self._futures.items() if not f.done()})
