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


@contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM (a `kill`, a container stopping) ends the report as Ctrl-C does: the temporary
    file is removed, the target left as it was (else the process dies with a half file)."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers belong to the main thread (a test calling `main` elsewhere)
        return

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


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
