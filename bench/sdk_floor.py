"""The CPU a run's client calls cost at the least, each measured alone: issue 29's floor.

A run (`bench/scale.py`) makes, per mention, about `--slack-calls` Slack Web API calls,
one model call and one streamed answer, and `--statements` database statements. This bench
times each kind of call on its own, in this process, against FakeSlack and FakeOpenAI in
another process (as remote as the real ones), with the clients the bot uses and the way it
uses them:

- Slack: `MeteredWebClient` (slack_sdk's `AsyncWebClient`) on one shared aiohttp session,
  `chat.update` with a three-block status view; baseline: the same request with bare aiohttp.
- the model: `OpenAICompatibleLLM` (the openai SDK, its aiohttp transport, the retry policy)
  `chat`, then `stream_chat` of a short answer; baseline: the same POST with bare aiohttp.
- the database: `Database.call(update_run)` on SQLite (a session, one Core UPDATE, commit);
  baseline: the same UPDATE and commit with `sqlite3`.

Printed per call (CPU of this process, `time.process_time`, over `--calls` calls after a
warm-up), and `sdk_floor_per_run`: the bot's clients' calls of one run added up, with no
request handling, engine, status rendering or logging, and none of a burst's contention
(`bench/scale.py` measures the whole). `bare_floor_per_run`: the same with the baselines.

    python bench/sdk_floor.py [--calls 500] [--slack-calls 8.6] [--statements 12.1]
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from slack_ack import remote_fakes  # noqa: E402

from bot.config import Settings  # noqa: E402
from bot.engine.llm import OpenAICompatibleLLM  # noqa: E402
from bot.model_http import model_http_client  # noqa: E402
from bot.observability.logs import configure_logging  # noqa: E402
from bot.observability.metrics import Metrics  # noqa: E402
from bot.storage import queries  # noqa: E402
from bot.storage.database import Database, open_database  # noqa: E402
from bot.surfaces.slack.client import MeteredWebClient  # noqa: E402
from tests.fakes.slack_api import BOT_TOKEN  # noqa: E402

WARM_UP = 50
STATUS = [
    {"type": "section", "text": {"type": "mrkdwn", "text": f"Working on it: step {i}"}}
    for i in range(3)
]
PROMPT = [
    {"role": "system", "content": "You are an operations assistant. " * 20},
    {"role": "user", "content": "status of service 1"},
]


async def cpu_us(call: Callable[[], Awaitable[Any]], calls: int) -> float:
    """CPU microseconds of this process per `call()`, after a warm-up."""
    for _ in range(WARM_UP):
        await call()
    started = time.process_time()
    for _ in range(calls):
        await call()
    return (time.process_time() - started) * 1e6 / calls


async def slack_figures(url: str, http: aiohttp.ClientSession, calls: int) -> tuple[float, float]:
    client = MeteredWebClient(
        token=BOT_TOKEN, base_url=url, meter=Metrics().platform("slack"), session=http
    )
    ts = (await client.chat_postMessage(channel="C1", text="Working on it"))["ts"]
    body = {"channel": "C1", "ts": ts, "text": "Working on it", "blocks": STATUS}
    headers = {"Authorization": f"Bearer {BOT_TOKEN}"}

    async def sdk() -> None:
        await client.chat_update(channel="C1", ts=ts, text="Working on it", blocks=STATUS)

    async def bare() -> None:
        async with http.post(f"{url}chat.update", json=body, headers=headers) as response:
            assert (await response.json())["ok"]

    return await cpu_us(sdk, calls), await cpu_us(bare, calls)


async def model_figures(
    url: str, http: aiohttp.ClientSession, calls: int
) -> tuple[float, float, float, float]:
    settings = Settings(
        _env_file=None, openai_base_url=url, openai_api_key="sk-bench", chatops_llm_max_retries=0
    )
    llm = OpenAICompatibleLLM.from_settings(settings, http_client=model_http_client())

    async def chat() -> None:
        await llm.chat(PROMPT, tools=[])

    async def stream() -> None:
        async for _ in llm.stream_chat(PROMPT):
            pass

    endpoint = f"{url.rstrip('/')}/chat/completions"
    headers = {"Authorization": "Bearer sk-bench"}

    async def bare_chat() -> None:
        body = {"model": settings.chatops_model, "messages": PROMPT}
        async with http.post(endpoint, json=body, headers=headers) as response:
            assert (await response.json())["choices"]

    async def bare_stream() -> None:
        body = {"model": settings.chatops_model, "messages": PROMPT, "stream": True}
        async with http.post(endpoint, json=body, headers=headers) as response:
            async for _ in response.content:
                pass

    try:
        return (
            await cpu_us(chat, calls),
            await cpu_us(bare_chat, calls),
            await cpu_us(stream, calls),
            await cpu_us(bare_stream, calls),
        )
    finally:
        await llm.close()


def database_figures(calls: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.db"
        db = Database(open_database(f"sqlite:///{path}"))
        thread = db.call(queries.create_conversation, "slack", "T1", "C1", "1.0")
        run = queries.new_run(conversation_id=thread.id, requester="U1", query="q", owner="bench")
        db.call(queries.add_run, run)

        def timed(update: Callable[[int], object]) -> float:
            for n in range(WARM_UP):
                update(n)
            started = time.process_time()
            for n in range(calls):
                update(n)
            return (time.process_time() - started) * 1e6 / calls

        sdk = timed(lambda n: db.call(queries.update_run, run.id, iterations=n))
        db.close()
        raw = sqlite3.connect(path)
        raw.execute("PRAGMA synchronous=NORMAL")  # as the engine's connections (WAL: no fsync)
        try:

            def bare(n: int) -> None:
                raw.execute("UPDATE run SET iterations = ? WHERE id = ?", (n, run.id))
                raw.commit()

            return sdk, timed(bare)
        finally:
            raw.close()


async def main(args: argparse.Namespace) -> int:
    configure_logging("WARNING")
    async with remote_fakes() as (slack_url, llm_url), aiohttp.ClientSession() as http:
        slack, slack_bare = await slack_figures(slack_url, http, args.calls)
        chat, chat_bare, stream, stream_bare = await model_figures(llm_url, http, args.calls)
    statement, statement_bare = database_figures(args.calls)
    floor = args.slack_calls * slack + chat + stream + args.statements * statement
    bare = args.slack_calls * slack_bare + chat_bare + stream_bare
    bare += args.statements * statement_bare
    for name, value in (
        ("slack_call", slack), ("slack_call_bare_aiohttp", slack_bare),
        ("model_chat_call", chat), ("model_chat_call_bare_aiohttp", chat_bare),
        ("model_stream_call", stream), ("model_stream_call_bare_aiohttp", stream_bare),
        ("database_statement_sqlite", statement),
        ("database_statement_bare_sqlite3", statement_bare),
    ):  # fmt: skip
        print(f"bench: sdk_floor_{name}_cpu = {value:.0f} us")
    print(f"bench: sdk_floor_per_run = {floor / 1000:.2f} ms")
    print(f"bench: bare_floor_per_run = {bare / 1000:.2f} ms")
    return 0


def cli() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500, help="calls timed of each kind")
    parser.add_argument("--slack-calls", type=float, default=8.6, help="Slack calls a run")
    parser.add_argument("--statements", type=float, default=12.1, help="statements a run")
    return asyncio.run(main(parser.parse_args()))


if __name__ == "__main__":
    raise SystemExit(cli())
