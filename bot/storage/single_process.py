"""SQLite is single-process: one `chatops serve` per database file, enforced by a lock file.

Two processes on one SQLite file would each recover the other's runs at start-up (failing the
runs it is working on, waiting twice on the same approval) and each wake only on the clicks it
receives itself. PostgreSQL is the way to run more than one process. So `chatops serve` holds an
exclusive `flock` on `<database>.lock` for its whole life; a second one finds it taken and stops
with one line naming the file and the holder's process id. The kernel drops the lock when the
process ends, however it ends (`kill -9` included), so a crash never leaves a stale lock behind.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import IO, Self

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from bot.errors import StartupError


def sqlite_file(url: str) -> Path | None:
    """The database file of a SQLite URL; None for other databases and in-memory SQLite."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        return None
    if parsed.get_backend_name() != "sqlite":
        return None
    database = parsed.database or ""
    if database in ("", ":memory:") or database.startswith("file::memory:"):
        return None
    return Path(database).resolve()


class SqliteProcessLock:
    """The exclusive lock of one SQLite database file, held from `acquire()` to `release()`."""

    def __init__(self, database: Path) -> None:
        self.database = database
        self.path = database.with_name(database.name + ".lock")
        self._file: IO[str] | None = None

    def acquire(self) -> None:
        """Take the lock, or raise `StartupError` saying another process holds it."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = self.path.open("a+", encoding="utf-8")  # "a+": never truncate the holder's pid
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            handle.close()
            raise StartupError(
                f"another chatops process (pid {holder}) is already serving the SQLite database "
                f"{self.database} (lock {self.path}); SQLite is single-process: stop that one, or "
                "use PostgreSQL (DATABASE_URL=postgresql+psycopg://...) to run more than one"
            ) from None
        except BaseException:
            handle.close()
            raise
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        self._file = handle

    def release(self) -> None:
        """Drop the lock (the file stays: removing it would race with a process taking it)."""
        if self._file is not None:
            fcntl.flock(self._file.fileno(), fcntl.LOCK_UN)
            self._file.close()
            self._file = None

    def __enter__(self) -> Self:
        self.acquire()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.release()


def single_process_guard(url: str) -> SqliteProcessLock | None:
    """The lock `chatops serve` must hold for `DATABASE_URL` (None: not SQLite, no lock)."""
    database = sqlite_file(url)
    return SqliteProcessLock(database) if database is not None else None
