"""Streamed answer latency: from the model's first token to the first text visible in the thread.

Starts the whole app (`bot.server.create_app`) on 127.0.0.1 with Slack pointed at FakeSlack and
the model at FakeOpenAI (SQLite in a temporary directory). Each signed mention starts a run
whose synthesis streams about 200 tokens at 40 tokens a second (one token: 4 characters), as a
model would. Runs go `--concurrency` at a time, `--answers` in all; then one batch again with
streaming turned off in the workspace (`not_allowed`: the fallback, one post at the end), the
baseline measured in the same run.

Printed: the time from the model's first token (FakeOpenAI's first content chunk of the
stream) to the first text in the thread (chat.startStream reaching FakeSlack), p50 and p99;
the same for the fallback (its chat.postMessage); the Web API calls each answer made (stream
start, appends, stop, the final in-place edit) and its appends; and the appends of the
busiest second of any one stream, with the shortest gap between two appends of a stream.
Appends share one budget per workspace (chat.appendStream is Tier 4, the bot keeps to 90 a
minute): with many streams at once each gets fewer, each carrying more text.

FakeSlack enforces no rate limits, so the bot's chat.update budget is lifted (as the tests do
with many runs): what is measured is the stream's own pacing, not the edit queue.

    python bench/answer_latency.py [--answers 30] [--concurrency 10] [--tokens 200]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.config import Settings  # noqa: E402
from bot.server import RUNTIME_KEY, create_app  # noqa: E402
from bot.surfaces.slack.inbound import SLACK_INBOUND_KEY  # noqa: E402
from tests.fakes.openai_server import FakeOpenAI, Turn, answer  # noqa: E402
from tests.fakes.slack_api import BOT_TOKEN, FakeSlack  # noqa: E402
from tests.slack.payloads import CHANNEL, SIGNING_SECRET, mention, signed_headers  # noqa: E402

TOKENS_PER_SECOND = 40.0
TOKEN_CHARS = 4
# what an answer's message costs once started: appends, the stop, the in-place edit (or delete)
ANSWER_CALLS = ("chat.appendStream", "chat.stopStream", "chat.update", "chat.delete")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def model(tokens: int) -> Any:
    words = " ".join(f"w{i:02d}" for i in range(tokens))  # "w00 " is one 4-character token
    synthesis = Turn(content=words, chunk_chars=TOKEN_CHARS,
                     chunk_delay_s=1.0 / TOKENS_PER_SECOND)  # fmt: skip

    def respond(body: dict[str, Any]) -> Turn:
        return synthesis if body.get("stream") else answer("nothing to do: answering")

    return respond


async def serve(app: web.Application) -> tuple[web.AppRunner, str]:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, f"http://127.0.0.1:{runner.addresses[0][1]}"


async def batch(
    base: str, app: web.Application, fake_openai: FakeOpenAI, size: int, tag: str
) -> list[tuple[str, float]]:
    """`size` mentions at once; (thread root, the model's first token) for each, once done."""
    questions = {f"question {tag}-{i:03d}": i for i in range(size)}
    events = [mention(question, user="U0DEV") for question in questions]
    async with aiohttp.ClientSession() as session:
        for event in events:
            body = json.dumps(event)
            async with session.post(f"{base}/slack/events", data=body,
                                    headers=signed_headers(body)) as response:  # fmt: skip
                assert response.status == 200
    await app[SLACK_INBOUND_KEY].wait_idle(30)
    await app[RUNTIME_KEY].run_manager.wait_idle(120)
    firsts: dict[int, float] = {}
    for at, body in fake_openai.first_chunks:
        text = json.dumps(body["messages"])
        for question, i in questions.items():
            if question in text:
                firsts[i] = at
    return [(events[i]["event"]["ts"], at) for i, at in sorted(firsts.items())]


def latencies(fake: FakeSlack, runs: list[tuple[str, float]], method: str) -> list[float]:
    """Seconds from the model's first token to the first text in each run's thread (the
    stream's start, or the fallback's answer post after the status message)."""
    found = []
    for root, first_token in runs:
        calls = [c for c in fake.calls(method) if c.args.get("thread_ts") == root]
        if method == "chat.postMessage":
            calls = calls[1:]
        found.append(min(c.at for c in calls) - first_token)
    return found


def stream_figures(fake: FakeSlack, roots: list[str]) -> tuple[float, float, int, float]:
    """(Web API calls per answer, appends per answer, appends in the busiest second of one
    stream, shortest gap between two appends of one stream)."""
    calls_per_answer, appended, busiest, shortest = [], [], 0, float("inf")
    for root in roots:
        [message] = [m for m in fake.thread_messages(CHANNEL, root) if "streaming" in m]
        ts = message["ts"]
        appends = sorted(c.at for c in fake.calls("chat.appendStream") if c.args["ts"] == ts)
        starts = [c for c in fake.calls("chat.startStream") if c.args.get("thread_ts") == root]
        after = [c for c in fake.calls() if c.args.get("ts") == ts and c.method in ANSWER_CALLS]
        calls_per_answer.append(len(starts) + len(after))
        appended.append(len(appends))
        for i, at in enumerate(appends):
            busiest = max(busiest, sum(1 for a in appends[i:] if a - at < 1.0))
        shortest = min([shortest, *(b - a for a, b in zip(appends, appends[1:], strict=False))])
    count = len(calls_per_answer)
    return sum(calls_per_answer) / count, sum(appended) / count, busiest, shortest


async def main(answers: int, concurrency: int, tokens: int) -> None:
    fake_slack, fake_openai = FakeSlack(), FakeOpenAI()
    await fake_slack.start()
    await fake_openai.start()
    fake_openai.respond_with(model(tokens))
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "manifests").mkdir()
        settings = Settings(
            _env_file=None, database_url=f"sqlite:///{tmp}/bench.db",
            chatops_manifests_dir=Path(tmp) / "manifests", openai_base_url=fake_openai.base_url,
            openai_api_key="sk-bench-not-a-secret", chatops_model="fake-model",
            chatops_llm_max_retries=0, slack_bot_token=BOT_TOKEN,
            slack_signing_secret=SIGNING_SECRET, slack_api_url=fake_slack.url,
            chatops_max_active_runs_per_user=10_000,  # one person asks every question
        )  # fmt: skip
        app = create_app(settings)
        runner, base = await serve(app)
        try:
            limiter = app[SLACK_INBOUND_KEY].surface.limiter
            limiter.rate, limiter.burst = 1000.0, 1000.0
            started = time.monotonic()
            streamed: list[tuple[str, float]] = []
            while len(streamed) < answers:
                size = min(concurrency, answers - len(streamed))
                streamed += await batch(base, app, fake_openai, size, f"s{len(streamed)}")
            wall = time.monotonic() - started
            lat = latencies(fake_slack, streamed, "chat.startStream")
            per_answer, appends, busiest, shortest = stream_figures(
                fake_slack, [r for r, _ in streamed]
            )
            fake_slack.turn_off("chat.startStream", "not_allowed")  # the workspace lacks it
            posted = await batch(base, app, fake_openai, concurrency, "plain")
            base_lat = latencies(fake_slack, posted, "chat.postMessage")
        finally:
            await runner.cleanup()
            await fake_slack.stop()
            await fake_openai.stop()
    print(f"bench: answers_streamed = {len(streamed)} answers")
    print(f"bench: tokens_per_answer = {tokens} tokens at {TOKENS_PER_SECOND:g}/s")
    print(f"bench: first_text_after_first_token_p50 = {percentile(lat, 0.5) * 1000:.1f} ms")
    print(f"bench: first_text_after_first_token_p99 = {percentile(lat, 0.99) * 1000:.1f} ms")
    print(f"bench: first_text_without_streaming_p50 = {percentile(base_lat, 0.5) * 1000:.1f} ms")
    print(f"bench: first_text_without_streaming_p99 = {percentile(base_lat, 0.99) * 1000:.1f} ms")
    print(f"bench: api_calls_per_answer = {per_answer:.1f} calls")
    print(f"bench: appends_per_answer = {appends:.1f} calls")
    print(f"bench: appends_in_busiest_second_of_a_stream = {busiest} calls")
    print(f"bench: shortest_gap_between_appends = {shortest * 1000:.0f} ms")
    print(f"bench: wall = {wall:.1f} s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--answers", type=int, default=30)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--tokens", type=int, default=200)
    args = parser.parse_args()
    asyncio.run(main(args.answers, args.concurrency, args.tokens))
