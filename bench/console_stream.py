"""The console's event stream: from a status edit to every browser, and a reconnect's replay.

Starts the real app (`create_app`, SQLite in a temporary directory, no model needed) on
127.0.0.1 and connects `--readers` SSE clients over HTTP. Then `--edits` status edits go through
the console surface one after the other (spread over `--threads` conversations, as uncoalesced
runs would make them: each step is stored, then broadcast), and each reader timestamps every
item it receives. Prints the edit's own time (store + broadcast), the time from the edit's start
to the item arriving at a reader (p50/p99 over every reader), and a reconnect's replay: a new
reader with `Last-Event-ID: 0` receiving every item the store holds.

    .venv/bin/python bench/console_stream.py [--edits 2000] [--readers 5] [--threads 500]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot.chat.threads import MessageRef, ThreadRef  # noqa: E402
from bot.chat.views import StatusStep, StatusView  # noqa: E402
from bot.config import Settings  # noqa: E402
from bot.server import RUNTIME_KEY, create_app  # noqa: E402


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, round(p / 100 * len(ordered)) - 1))]


class Reader:
    """One browser: reads the stream, notes when each item's event id arrived."""

    def __init__(self, http: aiohttp.ClientSession, url: str, last_id: int | None) -> None:
        self.http, self.url, self.last_id = http, url, last_id
        self.arrived: dict[int, float] = {}
        self.ready = asyncio.Event()
        self.count = 0

    async def run(self, until: int) -> None:
        headers = {"Last-Event-ID": str(self.last_id)} if self.last_id is not None else {}
        async with self.http.get(self.url, headers=headers, timeout=None) as response:
            self.ready.set()
            buffer = b""
            async for chunk in response.content.iter_any():
                buffer += chunk
                while b"\n\n" in buffer:
                    block, buffer = buffer.split(b"\n\n", 1)
                    lines = dict(x.split(": ", 1) for x in block.decode().split("\n") if ": " in x)
                    if lines.get("event") != "item":
                        continue
                    seq = json.loads(lines["data"])["seq"]
                    self.arrived[seq] = time.perf_counter()
                    self.count += 1
                    if seq >= until:
                        return


async def main(edits: int, readers: int, threads: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(_env_file=None, database_url=f"sqlite:///{tmp}/bench.db",
                            chatops_manifests_dir=Path(tmp))  # fmt: skip
        app = create_app(settings)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        url = f"http://127.0.0.1:{port}/console/api/events"
        surface = app[RUNTIME_KEY].run_manager.surfaces()["console"]
        refs = [
            MessageRef(ThreadRef("console", "local", "console", f"{n:032x}"), f"status-{n}")
            for n in range(threads)
        ]
        async with aiohttp.ClientSession() as http:
            live = [Reader(http, url, None) for _ in range(readers)]
            tasks = [asyncio.create_task(r.run(edits)) for r in live]
            await asyncio.gather(*(r.ready.wait() for r in live))
            started: dict[int, float] = {}
            own: list[float] = []
            for i in range(edits):
                ref = refs[i % threads]
                view = StatusView(
                    state="running",
                    steps=tuple(StatusStep(f"ops__step_{s}", "done", 0.1) for s in range(i % 6)),
                    headline=f"Running step {i}",
                )
                begun = time.perf_counter()
                await surface.update_status(ref, view)
                own.append((time.perf_counter() - begun) * 1000)
                started[i + 1] = begun
            await asyncio.wait_for(asyncio.gather(*tasks), 60)
            delivered = [
                (reader.arrived[seq] - started[seq]) * 1000
                for reader in live
                for seq in started
                if seq in reader.arrived
            ]
            replay = Reader(http, url, 0)
            begun = time.perf_counter()
            await asyncio.wait_for(replay.run(edits), 60)
            replay_s = time.perf_counter() - begun
        await runner.cleanup()
    print(f"bench: console_edits = {edits} edits over {threads} threads, {readers} readers")
    print(f"bench: console_edit_p50 = {statistics.median(own):.2f} ms")
    print(f"bench: console_edit_p99 = {pct(own, 99):.2f} ms")
    print(f"bench: console_edit_to_browser_p50 = {statistics.median(delivered):.2f} ms")
    print(f"bench: console_edit_to_browser_p99 = {pct(delivered, 99):.2f} ms")
    print(f"bench: console_items_delivered = {len(delivered)} of {edits * readers}")
    print(f"bench: console_replay = {replay.count} items in {replay_s * 1000:.0f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--edits", type=int, default=2000)
    parser.add_argument("--readers", type=int, default=5)
    parser.add_argument("--threads", type=int, default=500)
    args = parser.parse_args()
    asyncio.run(main(args.edits, args.readers, args.threads))
