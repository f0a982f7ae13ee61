"""Scale: real `chatops serve` processes on PostgreSQL (one, two) and SQLite, under load.

Signed Slack events through the real HTTP entry (`POST /slack/events`) of real serve
processes; FakeSlack, FakeOpenAI (each call thinks `--think` 0.3 s; a run without tools makes
two: the decision and the streamed answer) and the fake ops API run in this process, on
127.0.0.1. PostgreSQL (127.0.0.1:5432/test, or $CHATOPS_TEST_POSTGRES_URL): a private schema
per set-up, dropped after, as the tests do. Fresh processes each time, five warm-up runs
each, then 10.5 s idle so /healthz's 10-second lag window holds only the phase measured.

- pg1: one process, `burst`; then another process (fresh schema), `held`.
- pg2: two processes, one database: `burst` (events alternate), then `--samples` approvals
  clicked on the owning process (same_process) and on the other one (other_process).
- sqlite1: one process, `burst`.

Figures (`scale_<set-up>_<name>`):
- burst: `--mentions` (200) at once over keep-alive connections opened before.
  mention_to_first_status: the event's POST to FakeSlack receiving the run's first
  chat.postMessage in the thread (its status message); it includes the ack (the event is
  committed first) and the inbox's burst batching (up to 250 ms). runs_per_s: runs whose
  status showed Done, over first POST to last Done; a run's last status edit keeps the
  production pace (one edit a second per message). server_cpu_per_run: the serve
  processes' CPU (/proc) over the burst, per mention.
- held: `--runs` (1,000) at once, each held in its first model call (FakeOpenAI's hold)
  until all are active (held_ramp, with its CPU per run and loop lag); all stay active for
  one lag window (held_active_loop_lag: the window read at its end); rss_per_active_run is
  VmRSS growth from before the runs to the highest reading meanwhile, per active run (each
  holds an open model request). Then SIGTERM with them in flight (held_shutdown): releasing
  them all at once would be a herd no real model makes.
- decide_to_resume: from the Approve click's POST to the ops API receiving that restart,
  each sample at most `--decide-timeout` (20 s): a timed-out sample counts as 20 s (then the
  percentiles are lower bounds; `_timed_out` says how many). click_to_card_decided: to the
  card's edit (the clicked process has decided). Until processes wake each other's waiters
  the other process's decision reaches the run only at its reminder or deadline.
- loop_lag: the serve processes' /healthz `loop_lag_ms`, read every second during the phase:
  the worst p99 and max of those windows. bench_loop_lag_p99: this process's own (sender and
  fakes): when high, the latencies above include its delays.
- the burst's work per run (issue 29's "measure first"), over the burst, per mention:
  db_statements_per_run: the statements the serve processes sent (`chatops_db_statements_total`
  from each one's /metrics before and after, summed; then by kind, db_<kind>_per_run); it
  includes this bench's /healthz reads (one `SELECT 1` a second per process) and the second
  scrape's two gauge reads, under 0.1 a run at 200 mentions; the pool's pre-pings and the
  PostgreSQL wake-ups' NOTIFYs are not counted. platform_calls_per_run: the processes' Slack
  Web API calls (`chatops_platform_api_calls_total`, every method). model_calls_per_run:
  requests FakeOpenAI received (chat and streamed).
- `--profile DIR`: py-spy (the dev extra) samples each serve process over each burst:
  `py-spy record --pid PID --format raw -o DIR/<set-up>-<pid>.txt --rate 200 --nonblocking`,
  started before the burst and stopped with SIGINT after it. profile_samples: the samples
  taken (idle threads left out by py-spy); profile_top_<n> (n = 1..12): the frames with the
  most own samples (innermost frame of a stack, line numbers dropped) over the set-up's
  processes, as a percentage of all samples, printed `<percent> % <function> (<file>)`. The
  files are collapsed stacks: `flamegraph.pl DIR/sqlite1-<pid>.txt > sqlite1.svg` draws one.
  py-spy's own CPU competes for the same cores: the other figures of a profiled run are
  higher than an unprofiled run's.

Not production: Slack's per-workspace budgets are lifted (bench/_scale_serve.py: the bot
paces chat.update to 40 a minute per workspace and has no setting for it; FakeSlack enforces
none, and every event is in one workspace, so the budget, about 0.3 runs/s, would be the only
figure); CHATOPS_MAX_ACTIVE_RUNS is raised above `--runs` (default 500 refuses past it);
CHATOPS_LLM_TIMEOUT_S is 300 (a held call outlives the ramp). Two cores for everything:
serve processes, PostgreSQL and this process. With 1,000 held runs the default takes about
three minutes, not one (the ramp alone is about 30 s here); `--runs 100` for a short run.

Targets (DESIGN §4, not asserted): cross-process decide-to-resume p99 <= 50 ms;
mention-to-first-status p99 <= 250 ms at 200 concurrent mentions; 1,000 concurrent active
runs per process with event-loop lag p99 <= 50 ms.

    python bench/scale.py [--runs 1000] [--mentions 200] [--samples 10] [--think 0.3]
                          [--setups pg1,pg2,sqlite1] [--decide-timeout 20] [--profile DIR]
                          [--working N]

The bursts run with the product's default seats (CHATOPS_MAX_WORKING_RUNS: runs past them
queue, their status saying so at once); `--working 1000` is the baseline without a queue. The
held phase seats every run (it measures how many one process holds).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import math
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._scale_cluster import cluster  # noqa: E402
from bench._scale_phases import Figures, burst, decide, held, quiet, warm, warm_up  # noqa: E402
from bench._scale_profile import py_spy  # noqa: E402
from bot.loop_lag import LoopLag  # noqa: E402

SETUPS = ("pg1", "pg2", "sqlite1")
_COUNTS = {"mentions", "runs", "responses", "samples"}  # printed as whole numbers


def show(setup: str, figures: Figures) -> None:
    for name, (value, unit) in figures.items():
        shown = (
            "nan" if math.isnan(value) else f"{value:.0f}" if unit in _COUNTS else f"{value:.1f}"
        )
        print(f"bench: scale_{setup}_{name} = {shown} {unit}", flush=True)


async def one_setup(setup: str, args: argparse.Namespace) -> None:
    """The set-up's burst (and pg2's decisions) in fresh processes; pg1's held runs in
    another fresh one (its RSS growth is then the runs', not the burst's)."""
    env = {
        "CHATOPS_MAX_ACTIVE_RUNS": str(max(500, args.runs + 100)),
        # seven people make every run: the per-person caps would refuse most of them
        "CHATOPS_MAX_ACTIVE_RUNS_PER_USER": str(max(500, args.runs + 100)),
        "CHATOPS_MAX_PENDING_APPROVALS_PER_USER": str(max(500, args.runs + 100)),
        "CHATOPS_LLM_TIMEOUT_S": "300",
    }
    if args.working:  # else the product's default seats (CHATOPS_MAX_WORKING_RUNS)
        env["CHATOPS_MAX_WORKING_RUNS"] = str(args.working)
    began = time.monotonic()
    mine: list[dict[str, float]] = []  # this process's loop lag while each phase ran
    processes, postgres = (2 if setup == "pg2" else 1), setup != "sqlite1"
    async with (
        cluster(setup, processes=processes, postgres=postgres, think_s=args.think, env=env) as c,
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http,
    ):
        await warm_up(c, http)
        await warm(http, c.servers, args.mentions)
        settle()
        await quiet()
        async with own_lag(mine):
            show(setup, await burst(c, http, args.mentions, profile=args.profile))
            for other in (False, True) if setup == "pg2" else ():
                show(setup, await decide(c, http, args.samples, other=other,
                                         timeout_s=args.decide_timeout))  # fmt: skip
    if setup == "pg1" and args.runs:
        # every held run works at once: the phase measures how many a process can hold
        held_env = {**env, "CHATOPS_MAX_WORKING_RUNS": str(args.runs + 100)}
        async with (
            cluster(setup, processes=1, postgres=True, think_s=args.think, env=held_env) as c,
            aiohttp.ClientSession() as http,
        ):
            await warm_up(c, http)
            settle()
            await quiet()
            async with own_lag(mine):
                show(setup, await held(c, args.runs))
    show(setup, {
        "bench_loop_lag_p99": (max(m["p99"] for m in mine), "ms"),
        "bench_loop_lag_max": (max(m["max"] for m in mine), "ms"),
        "time": (time.monotonic() - began, "s"),
    })  # fmt: skip


def settle() -> None:
    """This process's heap (the fakes, their records) out of later full collections: one of
    those mid-phase would stall the sender, and be blamed on the server."""
    gc.collect()
    gc.freeze()


@contextlib.asynccontextmanager
async def own_lag(into: list[dict[str, float]]) -> AsyncIterator[None]:
    """This process's loop lag over the block (it sends, and runs the fakes)."""
    monitor = LoopLag(window_s=3600.0)
    monitor.start()
    try:
        yield
    finally:
        await monitor.stop()
        into.append(monitor.summary())


async def main(args: argparse.Namespace) -> None:
    began = time.monotonic()
    setups = args.setups.split(",")
    if unknown := [s for s in setups if s not in SETUPS]:
        raise SystemExit(f"unknown set-up {unknown[0]!r} (one of {', '.join(SETUPS)})")
    for setup in setups:
        await one_setup(setup, args)
    print(f"bench: scale_wall = {time.monotonic() - began:.1f} s")


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000, help="pg1: runs held active at once")
    parser.add_argument("--mentions", type=int, default=200, help="mentions in each burst")
    parser.add_argument("--samples", type=int, default=10, help="pg2: approvals each way")
    parser.add_argument("--think", type=float, default=0.3, help="model seconds per call")
    parser.add_argument(
        "--working", type=int, default=0,
        help="the bursts' CHATOPS_MAX_WORKING_RUNS (0: the product's default)",
    )  # fmt: skip
    parser.add_argument("--setups", default=",".join(SETUPS))
    parser.add_argument("--decide-timeout", type=float, default=20.0, help="seconds a sample")
    parser.add_argument(
        "--profile", type=Path, metavar="DIR", help="py-spy each serve process over each burst"
    )
    args = parser.parse_args()
    if args.profile is not None:
        py_spy()  # missing: say so now, not after the first set-up's warm-up
        args.profile.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main(args))


if __name__ == "__main__":
    cli()
