"""bench/scale.py's `--profile DIR`: py-spy samples every serve process while a burst runs.

Why py-spy: it samples another process from outside (no import, no code change in the bot,
`--nonblocking` never pauses it), so the profile is of `chatops serve` as it runs. One
`py-spy record --format raw` per process (collapsed stacks, one `frame;frame;... count` line
per distinct stack; idle threads left out by py-spy), started before the burst and stopped with
SIGINT after it, written to DIR/<set-up>-<pid>.txt (`flamegraph.pl` draws them). The figures
are the frames with the most *own* samples (the stack's innermost frame), over all the set-up's
processes, as a share of every sample taken; line numbers are dropped so a function's lines add
up. py-spy itself takes CPU on the same cores: a profiled run's other figures are not
comparable with an unprofiled one's.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import shutil
import signal
import sys
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

RATE_HZ = 200
TOP_FRAMES = 12
START_TIMEOUT_S = 15.0  # until py-spy says it is sampling
STOP_TIMEOUT_S = 60.0  # until it has written its file after SIGINT
_LINE_NUMBER = re.compile(r":\d+\)$")

Figures = dict[str, tuple[float, str]]


def py_spy() -> str:
    """The py-spy binary: on PATH, or beside this Python (the dev extra installs it there)."""
    beside = Path(sys.executable).with_name("py-spy")
    found = shutil.which("py-spy") or (str(beside) if beside.exists() else None)
    if found is None:
        raise SystemExit("--profile needs py-spy: `make test` installs it (the dev extra)")
    return found


class Recorder:
    """One `py-spy record` of one process; its messages (stdout and stderr) are kept."""

    def __init__(self, binary: str, pid: int, out: Path) -> None:
        self.binary, self.pid, self.out = binary, pid, out
        self.said: list[str] = []
        self._sampling = asyncio.Event()
        self._proc: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Start sampling; returns once py-spy says it samples (raises if it gave up)."""
        self._proc = await asyncio.create_subprocess_exec(
            self.binary, "record", "--pid", str(self.pid), "--format", "raw",
            "-o", str(self.out), "--rate", str(RATE_HZ), "--nonblocking",
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )  # fmt: skip
        self._reader = asyncio.create_task(self._read())
        sampling = asyncio.create_task(self._sampling.wait())
        exited = asyncio.create_task(self._proc.wait())
        await asyncio.wait({sampling, exited}, timeout=START_TIMEOUT_S,
                           return_when=asyncio.FIRST_COMPLETED)  # fmt: skip
        sampling.cancel()
        exited.cancel()
        if not self._sampling.is_set():
            await self.stop()
            raise RuntimeError(f"py-spy did not sample pid {self.pid}: {' '.join(self.said)}")

    async def _read(self) -> None:
        if self._proc is None or self._proc.stdout is None:
            return
        async for raw in self._proc.stdout:  # drained to the end: py-spy never blocks on it
            line = raw.decode(errors="replace").strip()
            if line:
                self.said.append(line)
            if "Sampling process" in line:
                self._sampling.set()

    async def stop(self) -> None:
        """SIGINT (py-spy then writes its file), and wait for it to exit (bounded)."""
        if self._proc is None:
            return
        if self._proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self._proc.send_signal(signal.SIGINT)
        try:
            await asyncio.wait_for(self._proc.wait(), STOP_TIMEOUT_S)
        except TimeoutError:
            self._proc.kill()
            await self._proc.wait()
        if self._reader is not None:
            await self._reader


@contextlib.asynccontextmanager
async def profiled(setup: str, pids: list[int], directory: Path | None) -> AsyncIterator[Figures]:
    """py-spy on each of `pids` over the block (nothing when `directory` is None; it must
    exist); the yielded figures are filled in after the block: `profile_samples` and the top
    frames."""
    figures: Figures = {}
    if directory is None:
        yield figures
        return
    binary = py_spy()
    recorders = [Recorder(binary, pid, directory / f"{setup}-{pid}.txt") for pid in pids]
    try:
        for recorder in recorders:
            await recorder.start()
        yield figures
    finally:
        for recorder in recorders:
            await recorder.stop()
    figures.update(collected(recorders))


def collected(recorders: list[Recorder]) -> Figures:
    """The top frames of the profiles written; a process py-spy wrote none of is said."""
    written = [r.out for r in recorders if r.out.exists()]
    for recorder in recorders:
        if recorder.out not in written:
            print(f"bench: py-spy wrote no profile of pid {recorder.pid}: {recorder.said}",
                  file=sys.stderr)  # fmt: skip
    return top_frames(written)


def top_frames(files: list[Path], top: int = TOP_FRAMES) -> Figures:
    """The frames with the most own samples over `files` (py-spy's raw collapsed stacks), each
    as a percentage of all their samples: `profile_top_<n>` = (percent, "% <frame>")."""
    own: Counter[str] = Counter()
    total = 0
    for path in files:
        for line in path.read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            if not count.isdigit():
                continue
            total += int(count)
            if stack.strip():  # a sample with no Python frame counts in the total only
                own[_LINE_NUMBER.sub(")", stack.rsplit(";", 1)[-1])] += int(count)
    figures: Figures = {"profile_samples": (total, "samples")}
    for n, (frame, samples) in enumerate(own.most_common(top), start=1):
        figures[f"profile_top_{n}"] = (100.0 * samples / total, f"% {frame}")
    return figures
