"""Start-up cost of `chatops serve`: the CPU of importing the server, and the time to ready.

Every `chatops serve` (and each one the test suite starts) pays for its imports before it
listens. `bot.startup_imports.frozen_imports` pauses the cyclic garbage collector for them and
freezes what they made; the baseline imports the same modules with the collector running, in
fresh processes taking turns with the measured ones, so machine load hits both alike. Then a
real `chatops serve` on a new SQLite file is started until `/readyz` answers 200.

    .venv/bin/python bench/serve_startup.py [--repetitions 7]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.server.serve_process import free_port  # noqa: E402

IMPORT_PLAIN = "import bot.server"
IMPORT_FROZEN = (
    "from bot.startup_imports import frozen_imports\n"
    "with frozen_imports():\n"
    "    import bot.server\n"
)


def _child_cpu_ms(code: str) -> float:
    """CPU (user + system) of a fresh interpreter running `code`, in ms."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    used = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return used * 1000


def _time_to_ready_ms(workdir: Path) -> float:
    """From starting `chatops serve` on a new SQLite file to `/readyz` answering 200."""
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{workdir}/bench-{port}.db",
        "CHATOPS_MANIFESTS_DIR": str(REPO / "manifests"),
        "OPENAI_API_KEY": "sk-bench",
        "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
    }
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "bot.cli", "serve", "--port", str(port)],
        cwd=workdir, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = started + 60
        while time.perf_counter() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1) as r:
                    if r.status == 200:
                        return (time.perf_counter() - started) * 1000
            except OSError:
                time.sleep(0.02)
        raise SystemExit("chatops serve was not ready within 60 s")
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repetitions", type=int, default=7)
    args = parser.parse_args()
    plain: list[float] = []
    frozen: list[float] = []
    for _ in range(args.repetitions):  # taking turns: load hits both alike
        plain.append(_child_cpu_ms(IMPORT_PLAIN))
        frozen.append(_child_cpu_ms(IMPORT_FROZEN))
    with tempfile.TemporaryDirectory() as workdir:
        ready = [_time_to_ready_ms(Path(workdir)) for _ in range(max(3, args.repetitions // 2))]
    print(f"bench: serve_import_cpu_baseline_gc_on = {statistics.median(plain):.0f} ms")
    print(f"bench: serve_import_cpu = {statistics.median(frozen):.0f} ms")
    print(f"bench: serve_time_to_ready = {statistics.median(ready):.0f} ms")


if __name__ == "__main__":
    main()
