"""A run's budgets: working time (human waits excluded) and tokens.

Each model call has its own timeout, but a whole run could take 50 iterations x 4 tries x 60 s.
`REACT_RUN_TIMEOUT_S` bounds the time a run works; the time it spends waiting for a person (an
approval card, a terminal prompt) is not work, so the hook that waits says so with
`PreToolUseContext.waiting_for_human()`, which pauses this clock. `REACT_RUN_MAX_TOKENS` bounds
the tokens its model calls use. Either ends the run with the fallback answer.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Literal

from bot.engine.errors import EngineError

Now = Callable[[], float]
BudgetReason = Literal["timeout", "token_budget"]


class RunClock:
    """Wall time of a run and how much of it was spent waiting for people.

    Waits may overlap (parallel calls each waiting for an approval): time counts as waiting
    while at least one wait is open, so nothing is subtracted twice. `now` is injectable, so
    tests move time by hand instead of sleeping.
    """

    def __init__(
        self, now: Now = time.monotonic, *, elapsed_before: float = 0.0, waited_before: float = 0.0
    ) -> None:
        self._now = now
        self._started = now()
        self._elapsed_before = elapsed_before
        self._waited = waited_before
        self._open = 0
        self._wait_started = 0.0

    @property
    def elapsed(self) -> float:
        """Wall time since the run began (across resumes)."""
        return self._elapsed_before + (self._now() - self._started)

    @property
    def waited(self) -> float:
        """Time spent with at least one human wait open."""
        ongoing = self._now() - self._wait_started if self._open else 0.0
        return self._waited + ongoing

    @property
    def working(self) -> float:
        """What the time budget counts: wall time minus human waits."""
        return self.elapsed - self.waited

    @contextmanager
    def human_wait(self) -> Iterator[None]:
        """Time inside this block is a person's, not the run's (may nest and overlap)."""
        if self._open == 0:
            self._wait_started = self._now()
        self._open += 1
        try:
            yield
        finally:
            self._open -= 1
            if self._open == 0:
                self._waited += self._now() - self._wait_started


class RunBudgetExceeded(EngineError):
    """The run used up its time or token budget; the loop ends with the fallback answer."""

    def __init__(self, reason: BudgetReason, detail: str) -> None:
        super().__init__(detail)
        self.reason: BudgetReason = reason
        self.detail = detail


def check_budget(
    clock: RunClock, tokens_used: int, *, timeout_s: float, max_tokens: int
) -> float | None:
    """Raise `RunBudgetExceeded` when a budget is spent; else the working seconds left
    (None: no time limit). A limit of 0 means none."""
    if max_tokens > 0 and tokens_used >= max_tokens:
        raise RunBudgetExceeded(
            "token_budget", f"it used {tokens_used:,} of its {max_tokens:,} tokens"
        )
    if timeout_s <= 0:
        return None
    left = timeout_s - clock.working
    if left <= 0:
        raise RunBudgetExceeded("timeout", timeout_detail(timeout_s))
    return left


def timeout_detail(timeout_s: float) -> str:
    return (
        f"it worked for its whole time budget of {timeout_s:g} s "
        "(time spent waiting for people not counted)"
    )
