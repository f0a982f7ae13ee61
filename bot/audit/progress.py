"""A progress line on stderr for an audit report that takes more than a second.

A fast report prints nothing; a slow one says what it is reading (the phase) and how many
rows it has written, at most every half second, from a thread of its own so a long query
still shows it is alive. On a terminal the line is rewritten in place and cleared at the
end; anywhere else (a log, a pipe) each update is a plain line, printed only when the
phase or the row count moved.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import TextIO

DELAY_S = 1.0
EVERY_S = 0.5


class Progress:
    """Shows the report's phase and rows on `stream` once it has run for `delay` seconds."""

    def __init__(
        self,
        stream: TextIO,
        *,
        delay: float = DELAY_S,
        every: float = EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._stream = stream
        self._delay = delay
        self._every = every
        self._clock = clock
        self._tty = _is_tty(stream)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._phase = "starting"
        self._rows = 0
        self._last_shown: tuple[str, int] | None = None
        self._thread: threading.Thread | None = None
        self._started = clock()

    def phase(self, name: str) -> None:
        """The report moved on to reading `name`."""
        with self._lock:
            self._phase = name

    def add_rows(self, n: int = 1) -> None:
        """`n` more rows written."""
        with self._lock:
            self._rows += n

    def __enter__(self) -> Progress:
        self._started = self._clock()
        self._thread = threading.Thread(target=self._run, name="audit-progress", daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._tty and self._last_shown is not None:
            self._write("\r\x1b[K")  # clear the line: what follows starts clean

    def line(self) -> str:
        """The progress line as it stands (without line ending)."""
        with self._lock:
            phase, rows = self._phase, self._rows
        text = f"chatops audit: {phase}"
        if rows:
            text += f", {rows:,} rows written"
        return f"{text} ({self._clock() - self._started:.1f} s)"

    def _run(self) -> None:
        if self._stop.wait(self._delay):
            return  # done within the delay: a fast report shows nothing
        while True:
            self._show()
            if self._stop.wait(self._every):
                return

    def _show(self) -> None:
        with self._lock:
            state = (self._phase, self._rows)
        if not self._tty and state == self._last_shown:
            return
        self._last_shown = state
        self._write(f"\r{self.line()}\x1b[K" if self._tty else self.line() + "\n")

    def _write(self, text: str) -> None:
        try:
            self._stream.write(text)
            self._stream.flush()
        except (OSError, ValueError):  # stderr closed or gone: progress is not worth failing for
            self._stop.set()


def _is_tty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
