"""Where `chatops audit` writes: stdout, or `--out FILE` written atomically.

The report goes to a temporary file in the target's directory (so the rename never crosses
file systems), is flushed and fsynced, then `os.replace`d over the target: a reader sees the
old file or the whole new one, never half a report, and an interrupted run (Ctrl-C, an error)
removes its temporary file and leaves the target as it was. The file is created readable by
its owner only (0600): reports quote call arguments.
"""

from __future__ import annotations

import os
import signal
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TextIO

from bot.errors import UserError

INTERRUPTING = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def report_output(path: str | None) -> Iterator[TextIO]:
    """stdout when `path` is None, else the atomically replaced file at `path`."""
    if path is None:
        yield sys.stdout
        return
    target = Path(path)
    if not target.parent.is_dir():
        raise UserError(f"--out {path}: directory {target.parent} does not exist")
    if target.is_dir():
        raise UserError(f"--out {path}: is a directory")
    try:
        fd, temp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    except OSError as exc:
        raise UserError(f"--out {path}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, target)
    except BaseException as exc:  # Ctrl-C included: no half report stays behind
        with suppress(OSError):
            os.unlink(temp)
        if isinstance(exc, OSError):
            raise UserError(f"--out {path}: {exc.strerror or exc}") from None
        raise
    _sync_directory(target.parent)


class Interrupts:
    """Ctrl-C (SIGINT) and SIGTERM (a `kill`, a container stopping) end the report: the
    temporary file is removed, the target left as it was (else SIGTERM kills the process with
    a half file). The handler raises KeyboardInterrupt where the main thread happens to be,
    which may be a finalizer that swallows it; so it also leaves a mark that `check()`, called
    for every row, turns into KeyboardInterrupt again."""

    def __init__(self) -> None:
        self.received: int | None = None

    def check(self) -> None:
        if self.received is not None:
            raise KeyboardInterrupt

    def _interrupt(self, signum: int, frame: object) -> None:
        self.received = signum
        raise KeyboardInterrupt


@contextmanager
def interruptible() -> Iterator[Interrupts]:
    """`Interrupts` with its handlers installed for the block (in the main thread only: signal
    handlers belong to it; a test calling `main` elsewhere gets a mark nobody sets)."""
    interrupts = Interrupts()
    if threading.current_thread() is not threading.main_thread():
        yield interrupts
        return
    previous = {sig: signal.signal(sig, interrupts._interrupt) for sig in INTERRUPTING}
    try:
        yield interrupts
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _sync_directory(directory: Path) -> None:
    """Make the rename itself durable (POSIX; a no-op where directories cannot be opened)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        with suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)
