"""Memory of one HTTP connector call whose API answers with a 64 MiB body.

A server process streams the body (64 KiB chunks, text/plain or JSON). Each measurement runs
in a fresh process, so its peak resident set (`ru_maxrss`) belongs to that measurement alone:
the growth of the peak across three calls of the connector tool (default `result`, 4,000
characters; and a JSON action with `result.pick`, read up to `max_response_bytes`, 1 MiB), and,
as the baseline, reading the same body whole with aiohttp (what the connector did before it
streamed).

    python bench/connector_response.py [--mib 64]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import resource
import sys
import tempfile
from multiprocessing.connection import Connection
from pathlib import Path

import yaml
from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from connectors.connector_set import ConnectorSet  # noqa: E402
from connectors.http import client_session  # noqa: E402

CHUNK = 64 * 1024


def serve(mib: int, conn: Connection) -> None:
    """The upstream API: `GET /text` and `GET /json` stream `mib` MiB, then end."""

    async def stream(request: web.Request, content_type: str, chunk: bytes) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": content_type})
        await response.prepare(request)
        try:
            for _ in range(mib * 1024 * 1024 // len(chunk)):
                await response.write(chunk)
        except (ConnectionError, RuntimeError):
            pass  # the client stopped reading and hung up
        return response

    text = (b"a log line of forty-two characters, ok!!\n" * (CHUNK // 42 + 1))[:CHUNK]
    items = (b'{"id": 12345, "name": "item"},' * (CHUNK // 30 + 1))[:CHUNK]

    async def main() -> None:
        app = web.Application()
        app.router.add_get("/text", lambda r: stream(r, "text/plain", text))
        app.router.add_get("/json", lambda r: stream(r, "application/json", items))
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        conn.send(runner.addresses[0][1])
        await asyncio.get_running_loop().run_in_executor(None, conn.recv)  # until told to stop
        await runner.cleanup()

    asyncio.run(main())


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def measure(mode: str, url: str, conn: Connection) -> None:
    """In a fresh process: the growth of the peak RSS across three calls."""

    manifest = {
        "name": "big", "base_url": url, "timeout_s": 120,
        "actions": [
            {"name": "text", "description": "text", "path": "/text"},
            {"name": "json", "description": "json", "path": "/json", "result": {"pick": ["id"]}},
        ],
    }  # fmt: skip

    async def connector_calls(action: str, directory: Path) -> None:
        async with client_session() as http:
            connectors = await ConnectorSet.load(directory, http=http, environ={})
            tool = connectors.tools.get(f"big__{action}")
            assert tool is not None
            before = peak_mib()
            for _ in range(3):
                result = await tool.invoke({})
                assert "truncated" in result.content, result.content[-200:]
            conn.send(peak_mib() - before)

    async def whole_body() -> None:
        async with client_session() as http:
            before = peak_mib()
            for _ in range(3):
                async with http.get(url + "/text") as response:
                    text = await response.text()
                    assert len(text) > 1024
                    del text
            conn.send(peak_mib() - before)

    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "big.yaml").write_text(yaml.safe_dump(manifest))
        asyncio.run(whole_body() if mode == "whole" else connector_calls(mode, Path(tmp)))


def run_in_process(mode: str, url: str) -> float:
    ours, theirs = multiprocessing.Pipe()
    process = multiprocessing.Process(target=measure, args=(mode, url, theirs))
    process.start()
    growth = ours.recv()
    process.join()
    return float(growth)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=64, help="body size in MiB")
    args = parser.parse_args()
    multiprocessing.set_start_method("spawn")
    ours, theirs = multiprocessing.Pipe()
    server = multiprocessing.Process(target=serve, args=(args.mib, theirs), daemon=True)
    server.start()
    url = f"http://127.0.0.1:{ours.recv()}"
    try:
        text = run_in_process("text", url)
        picked = run_in_process("json", url)
        whole = run_in_process("whole", url)
    finally:
        ours.send("stop")
        server.join(timeout=10)
    size = f"{args.mib}mib"
    print(f"bench: connector_text_response_{size}_rss_growth = {text:.1f} MiB")
    print(f"bench: connector_json_pick_response_{size}_rss_growth = {picked:.1f} MiB")
    print(f"bench: whole_body_read_{size}_rss_growth = {whole:.1f} MiB (baseline: read whole)")


if __name__ == "__main__":
    main()
