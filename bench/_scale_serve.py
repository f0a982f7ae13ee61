"""`chatops serve` for bench/scale.py: the real CLI, with Slack's per-workspace budgets lifted.

The bot paces its Slack calls to Slack's limits with `UpdateLimiter`s built in the Slack
surface (chat.update 40 a minute per workspace after a burst of 10; chat.appendStream 90;
agents.sessions.setStatus 40), and has no setting for them. FakeSlack enforces no limits, and
every bench event is in one workspace, so with those budgets a throughput bench measures
40 edits a minute (two a run), not the process. With `BENCH_SLACK_BUDGET=lifted` (what the
bench sets) the surface's limiters are built at `LIFTED_PER_MINUTE` instead; with
`production` (or unset) this is `chatops serve` exactly. Nothing else is changed, and the
production defaults are untouched: only this process's classes are swapped.

    python bench/_scale_serve.py serve --host 127.0.0.1 --port 8080
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.cli import main  # noqa: E402
from bot.surfaces.slack import inbound, outbound  # noqa: E402
from bot.surfaces.slack.limiter import UpdateLimiter  # noqa: E402

LIFTED_PER_MINUTE = 600_000.0  # 10,000 a second: never the bottleneck on 2 cores
LIFTED_BURST = 10_000
BUDGET_ENV = "BENCH_SLACK_BUDGET"


class LiftedLimiter(UpdateLimiter):
    """An `UpdateLimiter` whatever rate it is built with: `LIFTED_PER_MINUTE`."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.update(per_minute=LIFTED_PER_MINUTE, burst=LIFTED_BURST)
        super().__init__(**kwargs)


def lift_slack_budgets() -> None:
    """The Slack surface builds `LiftedLimiter`s (it names the class in these two modules)."""
    inbound.UpdateLimiter = LiftedLimiter  # type: ignore[misc]
    outbound.UpdateLimiter = LiftedLimiter  # type: ignore[misc]


if __name__ == "__main__":
    if os.environ.get(BUDGET_ENV, "production") == "lifted":
        lift_slack_budgets()
    sys.exit(main())
