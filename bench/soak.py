"""Soak: rounds of concurrent conversations through the real HTTP entry; memory and fds per round.

`chatops serve` runs as its own process on a temporary SQLite file (or `--database-url`), with
Slack pointed at FakeSlack, the model at FakeOpenAI (thinking `--think` seconds per answer) and
the connector at the fake ops API, all in this process. Each round, `--conversations` threads
start at once with signed `app_mention` events; each model asks for `ops__restart`, the card
is approved with a signed click, the restart runs and the answer is posted. Every thread is in
the bot's own workspace: the server drops events and clicks of any other (a bot token belongs
to one workspace), so Slack's edit budget for that workspace (`chat.update`, 40 a minute after
a burst of 10) paces each round, as it would in production: about three edits a
conversation (the card's outcome, the status message's states), so a round of 10 takes about
40 s, and the waits below grow with `--conversations`.

After each round (every answer posted, every run ended) the server's resident memory and open
file descriptors are read from /proc. Printed per round, then the growth from the first round
to the last per conversation: what the server keeps per conversation that it never lets go.

    python bench/soak.py [--rounds 3] [--conversations 10] [--think 0.3] [--database-url URL]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.surfaces.slack.cards import APPROVE_ACTION  # noqa: E402
from tests.fakes.openai_server import FakeOpenAI  # noqa: E402
from tests.fakes.ops_api import ANSWER, OpsAPI, ops_manifest, restart_then_answer  # noqa: E402
from tests.fakes.serving import started  # noqa: E402
from tests.fakes.slack_api import FakeSlack  # noqa: E402
from tests.server.serve_process import ServeProcess, SlackSender, serve_env  # noqa: E402
from tests.slack.payloads import CHANNEL, mention  # noqa: E402

ANSWER_MARK = ANSWER.splitlines()[0].lstrip("# ")
DONE = ":white_check_mark: Done"


def server_rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def server_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def conversation(round_no: int, index: int) -> dict[str, Any]:
    return mention(f"restart api (round {round_no}, {index})", user=f"U0DEV{index % 7}")


def card_of(fake: FakeSlack, root: str) -> dict[str, Any] | None:
    for message in fake.thread_messages(CHANNEL, root):
        blocks = message.get("blocks", [])
        if (
            blocks
            and blocks[0].get("type") == "header"
            and any(b.get("type") == "actions" for b in blocks)
        ):
            return message
    return None


def finished(fake: FakeSlack, root: str) -> bool:
    """The answer is in the thread and the status message shows the run done (its last edit:
    the run has ended in the server)."""
    said = fake.thread_messages(CHANNEL, root)
    return any(ANSWER_MARK in m.get("text", "") for m in said) and any(
        m.get("text", "").startswith(DONE) for m in said
    )


def patience_s(conversations: int) -> float:
    """How long one conversation may take: a margin, plus the round's edits (about three a
    conversation) at the workspace's 40 edits a minute."""
    return 120 + conversations * 3 * 60 / 40


async def one(
    slack: SlackSender, server: ServeProcess, fake: FakeSlack, event: dict[str, Any], wait: float
) -> None:
    root = event["event"]["ts"]
    assert await slack.send(server, event) == 200
    card = await fake.wait_for(lambda: card_of(fake, root), wait)
    assert await slack.click(server, card, APPROVE_ACTION, user="U0LEAD") == 200
    await fake.wait_for(lambda: finished(fake, root), wait)


async def soak(rounds: int, conversations: int, think_s: float, database_url: str | None) -> None:
    async with (
        started(FakeSlack()) as fake_slack,
        started(FakeOpenAI(think_s=think_s)) as fake_llm,
        started(OpsAPI()) as ops,
        aiohttp.ClientSession() as http,
    ):
        fake_llm.respond_with(restart_then_answer)
        with tempfile.TemporaryDirectory() as tmp:
            manifests = Path(tmp) / "manifests"
            manifests.mkdir()
            (manifests / "ops.yaml").write_text(ops_manifest(ops.url))
            env = serve_env(
                database_url=database_url or f"sqlite:///{Path(tmp) / 'soak.db'}",
                manifests=manifests,
                slack_url=fake_slack.url,
                llm_url=fake_llm.base_url,
                # seven people make every conversation: not a test of the per-person caps
                CHATOPS_MAX_ACTIVE_RUNS_PER_USER="10000",
                CHATOPS_MAX_PENDING_APPROVALS_PER_USER="10000",
            )
            server = ServeProcess(Path(tmp), env)
            await server.start()
            try:
                pid = server.pid
                slack = SlackSender(http)
                figures: list[tuple[int, int]] = []
                print(f"bench: soak_start_rss = {server_rss_kb(pid) / 1024:.1f} MB")
                print(f"bench: soak_start_open_fds = {server_fds(pid)} fds")
                for round_no in range(1, rounds + 1):
                    began = time.monotonic()
                    events = [conversation(round_no, i) for i in range(conversations)]
                    wait = patience_s(conversations)
                    await asyncio.gather(*(one(slack, server, fake_slack, e, wait) for e in events))
                    rss, fds = server_rss_kb(pid), server_fds(pid)
                    figures.append((rss, fds))
                    print(f"bench: soak_round_{round_no}_rss = {rss / 1024:.1f} MB")
                    print(f"bench: soak_round_{round_no}_open_fds = {fds} fds")
                    print(f"bench: soak_round_{round_no}_time = {time.monotonic() - began:.1f} s")
                assert len(ops.restarts) == rounds * conversations, "a restart was lost or repeated"
                later = conversations * (rounds - 1)
                if later:
                    growth = (figures[-1][0] - figures[0][0]) / later
                    print(f"bench: soak_rss_growth_per_conversation = {growth:.1f} KB")
                    print(f"bench: soak_fd_growth = {figures[-1][1] - figures[0][1]} fds")
                print(f"bench: soak_conversations = {rounds * conversations} conversations")
            finally:
                await server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--conversations", type=int, default=10)
    parser.add_argument("--think", type=float, default=0.3, help="model seconds per answer")
    parser.add_argument("--database-url", default=None, help="default: a temporary SQLite file")
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(soak(args.rounds, args.conversations, args.think, args.database_url))


if __name__ == "__main__":
    main()
