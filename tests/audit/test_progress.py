"""The progress line's rules, with the delays set to nothing: plain lines only when something
moved (a log is not flooded), a terminal's line rewritten in place and cleared, a closed
stderr never fails the report. The real process is in test_big_reports.py."""

from __future__ import annotations

import io
import threading

from bot.audit.progress import Progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def wait_for_lines(stream: io.StringIO, n: int) -> None:
    for _ in range(2000):
        if stream.getvalue().count("\n") >= n:
            return
        threading.Event().wait(0.005)
    raise AssertionError(f"fewer than {n} lines: {stream.getvalue()!r}")


def test_plain_lines_only_when_the_phase_or_rows_moved() -> None:
    out, clock = io.StringIO(), Clock()
    progress = Progress(out, delay=0, every=0.01, clock=clock)
    progress.phase("counting calls")
    with progress:
        wait_for_lines(out, 1)
        threading.Event().wait(0.1)  # ten more ticks, nothing moved
        assert out.getvalue().count("\n") == 1
        clock.now += 2.5
        progress.phase("exporting calls")
        progress.add_rows(1234)
        wait_for_lines(out, 2)
    lines = out.getvalue().splitlines()
    assert lines[-1] == "chatops audit: exporting calls, 1,234 rows written (2.5 s)"
    assert "\r" not in out.getvalue() and "\x1b" not in out.getvalue()


def test_a_terminal_line_is_rewritten_and_cleared() -> None:
    out = Terminal()
    progress = Progress(out, delay=0, every=0.01)
    progress.phase("durations")
    with progress:
        for _ in range(2000):
            if out.getvalue().count("\r") >= 2:
                break
            threading.Event().wait(0.005)
    text = out.getvalue()
    assert text.startswith("\rchatops audit: durations (") and "\n" not in text
    assert text.endswith("\r\x1b[K")


def test_a_quick_job_prints_nothing() -> None:
    out = io.StringIO()
    with Progress(out, delay=60) as progress:
        progress.phase("counting calls")
    assert out.getvalue() == ""


def test_a_closed_stderr_stops_the_progress_not_the_report() -> None:
    out = io.StringIO()
    out.close()
    with Progress(out, delay=0, every=0.01) as progress:
        progress.phase("counting calls")
        threading.Event().wait(0.05)
    # the report carried on: leaving the block raised nothing
