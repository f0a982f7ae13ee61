"""Many workspaces on one deployment, at reduced scale: real `chatops serve` processes in
Slack OAuth mode, `--workspaces` teams installed through the real `/slack/install` and
`/slack/oauth_redirect` (FakeSlack's `oauth.v2.access` issues each its own token), then
`--runs` mentions in each workspace at once, every workspace in its own channel.

FakeSlack ENFORCES Slack's per-workspace method limits here (tests/fakes/slack_limits.py:
chat.update Tier 3, 50 a minute per workspace; chat.postMessage about 1 a second per
channel), answering 429 with Retry-After; the serve processes run with the product's own
budgets (the bot paces chat.update to 40 a minute per workspace per process), unlike
bench/scale.py, which lifts them to measure CPU.

Figures (`workspaces_<name>`):
- runs_per_s: runs whose status showed Done, over the first mention to the last Done.
- status_delay_p50 / _p99: per run, mention to its status message showing Done (the last
  status edit), over every run; workspace_status_delay_p50 / _p99: each workspace's own
  p50 of that, then the p50 and p99 over workspaces (a slow workspace shows in the p99).
- first_status_p50 / _p99: mention to the status message's chat.postMessage.
- rate_limited: 429s FakeSlack answered (and by method); runs_not_done: runs that did not
  end within `--timeout`.
- server_cpu_per_run: the serve processes' CPU (/proc) over the burst, per run.

Every wait is bounded (`--timeout` for the runs, 60 s for start-up and installs).

    python bench/workspaces.py [--workspaces 20] [--runs 10] [--processes 1] [--postgres]
                               [--think 0.3] [--timeout 240]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import re
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from statistics import median
from typing import Any
from urllib.parse import parse_qsl, urlencode

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._scale_cluster import cpu_s, model, percentile, postgres_schema  # noqa: E402
from tests.fakes.openai_server import FakeOpenAI  # noqa: E402
from tests.fakes.ops_api import OpsAPI, ops_manifest  # noqa: E402
from tests.fakes.serving import started  # noqa: E402
from tests.fakes.slack_api import FakeSlack  # noqa: E402
from tests.server.serve_process import ServeProcess, serve_env  # noqa: E402
from tests.slack.payloads import as_body, mention, signed_headers  # noqa: E402
from tests.slack.workspaces import CLIENT_ID, CLIENT_SECRET, REDIRECT, from_team  # noqa: E402

DONE = ":white_check_mark: Done"
ENDED = (DONE, ":x: Failed", ":heavy_multiplication_x: Cancelled")
LINK = re.compile(r'href="(https://slack.com/oauth/v2/authorize\?[^"]+)"')
Figures = dict[str, tuple[float, str]]


def team(i: int) -> tuple[str, str]:
    return f"TW{i:04d}", f"CW{i:04d}"


async def install(http: aiohttp.ClientSession, server: str, fake: FakeSlack, team_id: str) -> None:
    """The install flow a person's browser makes, against a serve process."""
    async with http.get(f"{server}/slack/install") as response:
        page = await response.text()
        cookie = response.headers["Set-Cookie"].split(";", 1)[0]  # Secure: sent by hand
    link = LINK.search(page)
    if link is None:
        raise RuntimeError(f"no install link on /slack/install: {page[:200]}")
    state = dict(parse_qsl(link.group(1).split("?", 1)[1].replace("&amp;", "&")))["state"]
    code = fake.authorize(team_id, client_id=CLIENT_ID, redirect_uri=REDIRECT)
    query = urlencode({"code": code, "state": state})
    async with http.get(
        f"{server}/slack/oauth_redirect?{query}", headers={"Cookie": cookie},
        allow_redirects=False,
    ) as response:  # fmt: skip
        if response.status not in (200, 302):
            raise RuntimeError(f"install of {team_id}: HTTP {response.status}")


def events(workspaces: int, runs: int) -> list[tuple[str, dict[str, Any]]]:
    """(team, envelope) for every mention, interleaved across workspaces."""
    found = []
    for r in range(runs):
        for i in range(workspaces):
            team_id, channel = team(i)
            found.append((team_id, from_team(mention(f"check {r}", channel=channel), team_id)))
    return found


def progress(fake: FakeSlack) -> tuple[dict[str, float], dict[str, tuple[float, bool]]]:
    """Per thread root: its status message's post, and when the status showed the end."""
    first: dict[str, float] = {}
    ended: dict[str, tuple[float, bool]] = {}
    for call in fake.calls():
        if call.status != 200:
            continue
        if call.method == "chat.postMessage":
            root = call.args.get("thread_ts")
            if root and root not in first:
                first[root] = call.at
        elif call.method == "chat.update":
            said = str(call.args.get("text") or "")
            if said.startswith(ENDED):
                key = (str(call.args.get("channel")), str(call.args.get("ts")))
                root = fake.messages.get(key, {}).get("thread_ts")
                if root and root not in ended:
                    ended[root] = (call.at, said.startswith(DONE))
    return first, ended


async def burst(
    http: aiohttp.ClientSession, servers: list[ServeProcess], fake: FakeSlack,
    sent_events: list[tuple[str, dict[str, Any]]], timeout_s: float,
) -> Figures:  # fmt: skip
    roots = {e["event"]["ts"]: t for t, e in sent_events}
    sent: dict[str, float] = {}
    cpu_before = sum(cpu_s(s.pid) for s in servers)

    async def one(i: int, envelope: dict[str, Any]) -> int:
        body = as_body(envelope)
        headers = signed_headers(body)
        sent[envelope["event"]["ts"]] = time.monotonic()
        url = f"{servers[i % len(servers)].url}/slack/events"
        async with http.post(url, data=body, headers=headers) as response:
            await response.read()
            return response.status

    statuses = await asyncio.gather(*(one(i, e) for i, (_, e) in enumerate(sent_events)))
    deadline = time.monotonic() + timeout_s
    while True:  # bounded: until every run ended or the deadline
        first, ended = progress(fake)
        if all(r in ended for r in roots) or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.5)
    cpu = sum(cpu_s(s.pid) for s in servers) - cpu_before
    done = {r: at for r, (at, ok) in ended.items() if ok and r in roots}
    delays = {r: (at - sent[r]) * 1000 for r, at in done.items()}
    firsts = [(first[r] - sent[r]) * 1000 for r in roots if r in first]
    by_team: dict[str, list[float]] = {}
    for root, delay in delays.items():
        by_team.setdefault(roots[root], []).append(delay)
    per_team = [median(v) for v in by_team.values()]
    span = (max(done.values()) - min(sent.values())) if done else float("nan")
    limited = Counter(c.method for c in fake.rate_limited)
    figures: Figures = {
        "runs": (len(roots), "runs"),
        "runs_done": (len(done), "runs"),
        "runs_not_done": (len(roots) - len(done), "runs"),
        "non_200": (sum(1 for s in statuses if s != 200), "responses"),
        "runs_per_s": (len(done) / span if done else 0.0, "runs/s"),
        "first_status_p50": (percentile(firsts, 0.5), "ms"),
        "first_status_p99": (percentile(firsts, 0.99), "ms"),
        "status_delay_p50": (percentile(list(delays.values()), 0.5), "ms"),
        "status_delay_p99": (percentile(list(delays.values()), 0.99), "ms"),
        "workspace_status_delay_p50": (percentile(per_team, 0.5), "ms"),
        "workspace_status_delay_p99": (percentile(per_team, 0.99), "ms"),
        "status_edits": (len([c for c in fake.calls("chat.update") if c.status == 200]), "calls"),
        "rate_limited": (sum(limited.values()), "responses"),
        "server_cpu_per_run": (cpu * 1000 / max(1, len(roots)), "ms"),
    }
    for method, count in sorted(limited.items()):
        figures[f"rate_limited_{method.replace('.', '_')}"] = (count, "responses")
    return figures


async def main(args: argparse.Namespace) -> None:
    began = time.monotonic()
    cap = str(args.runs * args.workspaces + 100)
    async with (
        started(FakeSlack()) as fake,
        started(FakeOpenAI(think_s=args.think)) as llm,
        started(OpsAPI()) as ops,
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http,
    ):
        llm.respond_with(model)
        fake.register_app(CLIENT_ID, CLIENT_SECRET, REDIRECT)
        for i in range(args.workspaces):
            fake.add_channel(team(i)[1], team(i)[0])
        with tempfile.TemporaryDirectory() as tmp:
            async with contextlib.AsyncExitStack() as stack:
                manifests = Path(tmp) / "manifests"
                manifests.mkdir()
                (manifests / "ops.yaml").write_text(ops_manifest(ops.url))
                if args.postgres:
                    schema = f"bench_ws_{uuid.uuid4().hex[:8]}"
                    url = await stack.enter_async_context(postgres_schema(schema))
                else:
                    url = f"sqlite:///{Path(tmp) / 'workspaces.db'}"
                env = serve_env(
                    database_url=url, manifests=manifests, slack_url=fake.url, llm_url=llm.base_url,
                    slack_client_id=CLIENT_ID, slack_client_secret=CLIENT_SECRET,
                    slack_redirect_uri=REDIRECT, chatops_max_active_runs=cap,
                    chatops_max_active_runs_per_user=cap,
                    chatops_max_pending_approvals_per_user=cap,
                )  # fmt: skip
                env.pop("SLACK_BOT_TOKEN")  # OAuth mode: a token per installed workspace
                servers: list[ServeProcess] = []
                try:
                    for _ in range(args.processes):
                        servers.append(ServeProcess(Path(tmp), env))
                        await servers[-1].start()
                    for i in range(args.workspaces):
                        await asyncio.wait_for(
                            install(http, servers[i % len(servers)].url, fake, team(i)[0]), 60
                        )
                    fake.enforce_limits()  # from the burst on: the installs are not measured
                    figures = await burst(
                        http, servers, fake, events(args.workspaces, args.runs), args.timeout
                    )
                finally:
                    for server in servers:
                        with contextlib.suppress(Exception):
                            await server.stop()
    print(f"bench: workspaces_workspaces = {args.workspaces} workspaces")
    print(f"bench: workspaces_runs_each = {args.runs} runs")
    print(f"bench: workspaces_processes = {args.processes} processes")
    for name, (value, unit) in figures.items():
        shown = f"{value:.0f}" if unit in ("runs", "responses", "calls") else f"{value:.1f}"
        print(f"bench: workspaces_{name} = {shown} {unit}", flush=True)
    print(f"bench: workspaces_wall = {time.monotonic() - began:.1f} s")


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workspaces", type=int, default=20, help="teams installed")
    parser.add_argument("--runs", type=int, default=10, help="mentions at once in each")
    parser.add_argument("--processes", type=int, default=1, help="serve processes, one database")
    parser.add_argument("--postgres", action="store_true", help="PostgreSQL (else SQLite)")
    parser.add_argument("--think", type=float, default=0.3, help="model seconds per call")
    parser.add_argument("--timeout", type=float, default=240.0, help="seconds for the runs")
    args = parser.parse_args()
    if args.processes > 1 and not args.postgres:
        raise SystemExit("--processes > 1 needs --postgres (one database for all)")
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main(args))


if __name__ == "__main__":
    cli()
