"""The database's worker threads, with a fast lane.

Under a burst the database queue is where a run's work waits (SQLite has one worker, so every
store call of every run takes its turn). A person waiting to see something (an event's
acknowledgement, a thread's first status message) should not wait behind other runs' later
writes: work submitted `first` is taken before everything queued normally, in submission order
within each lane. A thread pool executor has one FIFO queue; this is that plus a rank.
"""

from __future__ import annotations

import itertools
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

FIRST, NORMAL = 0, 1  # ranks: lower is taken first


@dataclass(order=True)
class _Job:
    rank: int
    seq: int
    fn: Callable[[], Any] | None = field(compare=False)  # None: a worker's stop sign
    future: Future[Any] | None = field(compare=False)


class RankedWorkers:
    """`workers` threads taking jobs by rank, then by arrival. Like a ThreadPoolExecutor, a
    job whose future was cancelled before it started is skipped, and `shutdown` waits for the
    jobs in flight (a store call in a thread cannot be interrupted, and may hold locks)."""

    def __init__(self, workers: int, name: str) -> None:
        self._jobs: queue.PriorityQueue[_Job] = queue.PriorityQueue()
        self._seq = itertools.count()
        self._closed = False
        self._lock = threading.Lock()
        self._threads = [
            threading.Thread(target=self._work, name=f"{name}_{i}", daemon=True)
            for i in range(workers)
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, fn: Callable[[], Any], *, first: bool = False) -> Future[Any]:
        """Queue `fn`; its future. `first`: ahead of every job queued without it."""
        future: Future[Any] = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError("the database's workers are shut down")
            self._jobs.put(_Job(FIRST if first else NORMAL, next(self._seq), fn, future))
        return future

    def shutdown(self) -> None:
        """Finish what is queued and in flight, then stop the threads (idempotent)."""
        with self._lock:
            if not self._closed:
                self._closed = True
                for _ in self._threads:  # after every job: the stop signs rank last
                    self._jobs.put(_Job(NORMAL + 1, next(self._seq), None, None))
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join()

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job.fn is None or job.future is None:
                return
            if not job.future.set_running_or_notify_cancel():
                continue  # its caller stopped waiting before it began
            try:
                result = job.fn()
            except BaseException as exc:  # noqa: BLE001 - handed to the caller, as an executor does
                job.future.set_exception(exc)
            else:
                job.future.set_result(result)
