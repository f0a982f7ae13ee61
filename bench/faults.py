"""Faults: a seeded, bounded random schedule of a real deployment's faults over many
conversations, with the invariants checked at the end (tests/faults/invariants.py).

Two `chatops serve` processes (through bench/_scale_serve.py, Slack's edit budgets lifted so
the schedule is not paced by them) share one private PostgreSQL schema, reached through a TCP
proxy the bench controls; Slack is FakeSlack, the model FakeOpenAI, the targets the fake ops API
and a stdio MCP server. Each round injects one fault kind (tests/faults/kinds.py: backends
terminated, PostgreSQL restarted for up to longer than the lease, a process SIGSTOPped past
its lease, a heartbeat stalled past the lease while its process serves, a process restarted with
its clock a minute ahead, Slack 5xx/429 bursts, model timeouts and resets, the MCP server killed
mid-call; every kind once, then drawn at random) while `--background` plain conversations
(mention, card, approve) run beside it.
Then it waits for every run to settle and prints the invariants: duplicate executions, lost
events and stuck runs must all be 0; the exit status is 1 when one is not.

    python bench/faults.py [--seed 26] [--rounds 8] [--background 2] [--logs DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sqlalchemy import create_engine, text  # noqa: E402

from tests.faults.cluster import Cluster, cluster  # noqa: E402
from tests.faults.kinds import FAULTS  # noqa: E402

LAUNCHER = Path(__file__).with_name("_scale_serve.py")
LEASE_S = 6.0  # a PostgreSQL restart lasts 2-9 s; a SIGSTOP or a stalled beat until it lapses
POSTGRES_URL = os.environ.get(
    "CHATOPS_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)


def schedule(rng: random.Random, rounds: int) -> list[str]:
    """Every fault kind once (as far as `rounds` allows), then random ones, shuffled."""
    kinds = sorted(FAULTS)
    picked = kinds[:rounds] + [rng.choice(kinds) for _ in range(rounds - len(kinds))]
    rng.shuffle(picked)
    return picked


async def plain(deployment: Cluster, rng: random.Random) -> None:
    """A conversation beside the fault: mention, card, approve (on either process)."""
    conv = await deployment.mention(rng.randrange(len(deployment.processes)))
    if conv is not None and await deployment.wait_card(conv):
        await deployment.approve(conv, rng.randrange(len(deployment.processes)))


async def run(seed: int, rounds: int, background: int, database_url: str, root: Path) -> int:
    rng = random.Random(seed)
    began = time.monotonic()
    async with cluster(
        root, database_url, POSTGRES_URL, command=(sys.executable, str(LAUNCHER)),
        extra_env={"BENCH_SLACK_BUDGET": "lifted"}, lease_s=LEASE_S,
    ) as deployment:  # fmt: skip
        for name in schedule(rng, rounds):
            await asyncio.gather(
                FAULTS[name](deployment, rng), *(plain(deployment, rng) for _ in range(background))
            )
        verdict = await deployment.verdict(within=90)
        if not verdict.ok:
            print(deployment.logs(), file=sys.stderr)
    print(f"bench: faults_seed = {seed} seed")
    print(f"bench: faults_injected = {sum(deployment.injected.values())} faults")
    for name, count in sorted(deployment.injected.items()):
        print(f"bench: faults_injected_{name} = {count} faults")
    print(f"bench: faults_conversations = {verdict.conversations} conversations")
    print(f"bench: faults_duplicate_executions = {verdict.duplicate_executions} calls")
    print(f"bench: faults_duplicate_outcomes = {verdict.duplicate_outcomes} conversations")
    print(f"bench: faults_lost_events = {verdict.lost_events} events")
    print(f"bench: faults_stuck_runs = {verdict.stuck_runs} runs")
    print(f"bench: faults_pending_approvals = {verdict.pending} runs")
    print(f"bench: faults_wall = {time.monotonic() - began:.1f} s")
    for problem in verdict.problems:
        print(f"invariant broken: {problem}", file=sys.stderr)
    return 0 if verdict.ok else 1


def _sql(statement: str) -> None:
    admin = create_engine(POSTGRES_URL, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(statement))
    finally:
        admin.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=26)
    parser.add_argument(
        "--rounds", type=int, default=len(FAULTS), help="fault rounds (default: each kind once)"
    )
    parser.add_argument("--background", type=int, default=2, help="plain conversations a round")
    parser.add_argument("--logs", help="keep the processes' whole logs in this folder")
    args = parser.parse_args()
    schema = f"bench_faults_{uuid.uuid4().hex[:8]}"
    _sql(f'CREATE SCHEMA "{schema}"')
    sep = "&" if "?" in POSTGRES_URL else "?"
    database_url = f"{POSTGRES_URL}{sep}options=-csearch_path%3D{schema}"
    try:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(args.logs or tmp)
            root.mkdir(parents=True, exist_ok=True)
            code = asyncio.run(run(args.seed, args.rounds, args.background, database_url, root))
    finally:
        _sql(f'DROP SCHEMA "{schema}" CASCADE')
    sys.exit(code)


if __name__ == "__main__":
    main()
