"""The ids of the work a log line is about, carried by the task that does the work.

A run's task binds its conversation and run ids once; every line logged while that task (and
the tasks it starts) runs carries them, whichever module logs it. An approval wait adds its
approval id for as long as it waits.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class LogContext:
    conversation_id: int | None = None
    run_id: str | None = None
    approval_id: str | None = None
    trace_id: str | None = None


_UNBOUND = LogContext()  # frozen: a shared default is safe
_CURRENT: ContextVar[LogContext] = ContextVar("chatops_log_context", default=_UNBOUND)


def bind(**ids: object) -> None:
    """Add ids to this task's context (and that of the tasks it starts from now on)."""
    _CURRENT.set(replace(_CURRENT.get(), **ids))  # type: ignore[arg-type]


@contextlib.contextmanager
def bound(**ids: object) -> Iterator[None]:
    """Ids for the length of a block (an approval wait), then as they were."""
    token = _CURRENT.set(replace(_CURRENT.get(), **ids))  # type: ignore[arg-type]
    try:
        yield
    finally:
        _CURRENT.reset(token)


def current() -> LogContext:
    return _CURRENT.get()


class ContextFilter(logging.Filter):
    """Puts the current ids on each record (`record.run_id`, ...; None when unbound), for the
    formatters; a record that already carries an id (`extra=`) keeps it."""

    def filter(self, record: logging.LogRecord) -> bool:
        context = _CURRENT.get()
        for name in ("conversation_id", "run_id", "approval_id", "trace_id"):
            if getattr(record, name, None) is None:
                setattr(record, name, getattr(context, name))
        return True
