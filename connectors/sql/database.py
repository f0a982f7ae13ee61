"""Running statements on a connector's database: read-only transactions, timeouts, row caps.

The URL comes from the environment at call time (a secret: it never reaches an observation, a
log line or an error) and SQLAlchemy's engine is made once per URL value. Each statement runs
on its own connection, in its own transaction, under a statement timeout:
- read-only work (the `query` action, declared actions that only read) runs in the database's
  read-only transaction (PostgreSQL `SET TRANSACTION READ ONLY`, MySQL `START TRANSACTION READ
  ONLY`, SQLite `PRAGMA query_only`) and is rolled back, so a write that got past the checker is
  still refused by the database itself;
- model-written SQL goes to the driver as one statement that cannot hold another (PostgreSQL: a
  server-side cursor, `DECLARE ... CURSOR FOR`, which takes one query; MySQL: no
  multi-statements; SQLite: one statement per call), with the lexing settings the checker
  assumed pinned (`standard_conforming_strings`, no `NO_BACKSLASH_ESCAPES`/`ANSI_QUOTES`);
- rows are fetched up to the cap plus one (unbuffered cursors), so a huge result is never read.

Everything runs in a worker thread (`asyncio.to_thread`): SQLAlchemy here is synchronous.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote

from sqlalchemy import Connection, Engine, create_engine, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError, SQLAlchemyError

from bot.errors import ConnectorError
from connectors.auth import MissingSecretError
from connectors.sql.manifest import Dialect, SqlConnector

DRIVERS = {"postgresql": "psycopg", "mysql": "pymysql", "mariadb": "pymysql"}
BACKENDS: dict[str, frozenset[str]] = {
    "postgresql": frozenset({"postgresql"}),
    "mysql": frozenset({"mysql", "mariadb"}),
    "sqlite": frozenset({"sqlite"}),
}
PG_TIMEOUT, PG_READ_ONLY = "57014", "25006"  # SQLSTATEs: query_canceled, read_only_sql_transaction
MYSQL_TIMEOUTS = frozenset({3024, 1969})  # MySQL max_execution_time, MariaDB max_statement_time
MYSQL_READ_ONLY = 1792  # ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION
SQLITE_READONLY = 8  # SQLITE_READONLY (query_only refuses writes with it)
SQLITE_PROGRESS_STEPS = 1000  # virtual-machine steps between deadline checks
MESSAGE_CHARS = 300


@dataclass(frozen=True)
class Rows:
    """What a statement gave: column names and at most the cap's rows (`more`: there were
    more), or, for a statement without rows, how many it affected."""

    columns: tuple[str, ...]
    rows: Sequence[Sequence[Any]]
    more: bool = False
    affected: int | None = None


class SqlFailed(ConnectorError):
    """The database refused or failed the statement; the message is the database's, redacted
    by the caller."""


class StatementTimeout(SqlFailed):
    """The statement ran longer than the connector's `timeout_s` and was cut."""


class ReadOnlyRefused(SqlFailed):
    """The read-only transaction refused a write (the second lock held)."""


class SqlUnreachable(SqlFailed):
    """No connection could be made (the connector's own fault: the breaker counts it)."""


def database_url(value: str, dialect: Dialect) -> URL:
    """The SQLAlchemy URL of an environment value, with this project's driver when none is
    named (`postgresql://` -> psycopg, `mysql://` -> PyMySQL). Errors never quote the value."""
    try:
        url = make_url(value)
    except (ArgumentError, ValueError):
        raise ConnectorError("is not a SQLAlchemy URL (dialect://user:password@host/db)") from None
    backend = url.get_backend_name()
    if backend not in BACKENDS[dialect]:
        raise ConnectorError(f"names a {backend} database, but the manifest says {dialect}")
    if "+" not in url.drivername and backend in DRIVERS:
        url = url.set(drivername=f"{backend}+{DRIVERS[backend]}")
    return url


def url_problem(manifest: SqlConnector, environ: Mapping[str, str]) -> str:
    """Why the URL variable's value cannot be used ('' when it can, or is unset)."""
    value = environ.get(manifest.url_env)
    if not value:
        return ""
    try:
        database_url(value, manifest.dialect)
    except ConnectorError as exc:
        return f"environment variable {manifest.url_env} {exc}"
    return ""


def url_secrets(value: str) -> list[str]:
    """The URL as given and as rendered, and its password in the forms a message may show."""
    secrets = [value]
    try:
        url = make_url(value)
    except (ArgumentError, ValueError):
        return secrets
    secrets.append(url.render_as_string(hide_password=False))
    if url.password:
        password = str(url.password)
        secrets += [password, quote(password, safe=""), unquote(password)]
    return [s for s in dict.fromkeys(secrets) if s]


class _Deadline:
    """SQLite's statement timeout: a progress handler that interrupts past the deadline."""

    def __init__(self, seconds: float) -> None:
        self.ends = time.monotonic() + seconds
        self.hit = False

    def __call__(self) -> int:
        if time.monotonic() > self.ends:
            self.hit = True
            return 1
        return 0


class SqlDatabase:
    """One connector's database: the engine (made on first use) and statement running."""

    def __init__(self, manifest: SqlConnector, environ: Mapping[str, str]) -> None:
        self.manifest = manifest
        self.environ = environ
        self._engine: Engine | None = None
        self._engine_for = ""
        self._lock = threading.Lock()

    def secrets(self) -> list[str]:
        value = self.environ.get(self.manifest.url_env)
        return url_secrets(value) if value else []

    def engine(self) -> Engine:
        value = self.environ.get(self.manifest.url_env)
        if not value:
            raise MissingSecretError(f"environment variable {self.manifest.url_env} is not set")
        with self._lock:
            if self._engine is None or value != self._engine_for:  # a rotated URL: a new pool
                if self._engine is not None:
                    self._engine.dispose()
                url = database_url(value, self.manifest.dialect)
                try:
                    self._engine = create_engine(
                        url, pool_pre_ping=True, connect_args=self._connect_args(url)
                    )
                except (ArgumentError, NoSuchModuleError) as exc:
                    message = f"cannot use the database URL: {type(exc).__name__}"
                    raise ConnectorError(message) from None
                self._engine_for = value
            return self._engine

    def _connect_args(self, url: URL) -> dict[str, Any]:
        timeout = self.manifest.timeout_s
        backend = url.get_backend_name()
        if backend == "postgresql":
            return {"connect_timeout": max(1, round(timeout))}
        if backend in ("mysql", "mariadb"):  # read_timeout: a safety net behind the server's
            return {"connect_timeout": max(1, round(timeout)), "read_timeout": timeout + 5}
        return {"timeout": timeout}  # SQLite: how long to wait for a lock

    def dispose(self) -> None:
        with self._lock:
            if self._engine is not None:
                self._engine.dispose()
                self._engine = None

    def run(
        self,
        sql: str,
        params: Mapping[str, Any] | None,
        *,
        read_only: bool,
        max_rows: int,
        stream: bool = False,
    ) -> Rows:
        """Run one statement. `params` None: model-written SQL (no binds, one statement, raw
        driver cursor); a mapping: a declared statement with `:name` binds, read through an
        unbuffered cursor when `stream` (a query: PostgreSQL declares a cursor for it). Raises
        `SqlFailed` (or a subclass) with the database's message."""
        engine = self.engine()
        try:
            conn = engine.connect()
        except SQLAlchemyError as exc:
            raise SqlUnreachable(f"cannot connect: {_message(exc)}") from None
        deadline = _Deadline(self.manifest.timeout_s)
        with conn:
            try:
                self._prelude(conn, read_only=read_only, free=params is None, deadline=deadline)
                if params is None:
                    rows = self._fetch_free(conn, sql, max_rows)
                else:
                    rows = self._fetch_declared(conn, sql, params, max_rows, stream=stream)
                conn.rollback() if read_only else conn.commit()
                return rows
            except Exception as exc:
                _quietly(conn.rollback)
                dbapi_error = engine.dialect.loaded_dbapi.Error
                if isinstance(exc, DBAPIError | dbapi_error):
                    raise self._classify(exc, deadline) from None
                raise
            finally:
                if self.manifest.dialect == "sqlite":
                    _quietly(lambda: self._sqlite_reset(conn))

    def _prelude(
        self, conn: Connection, *, read_only: bool, free: bool, deadline: _Deadline
    ) -> None:
        """The transaction's settings, before the statement (the first statement opens it)."""
        timeout = self.manifest.timeout_s
        dialect = self.manifest.dialect
        if dialect == "postgresql":
            if read_only:
                conn.exec_driver_sql("SET TRANSACTION READ ONLY")
            conn.exec_driver_sql(f"SET LOCAL statement_timeout = {max(1, round(timeout * 1000))}")
            if free:
                conn.exec_driver_sql("SET LOCAL standard_conforming_strings = on")
        elif dialect == "mysql":
            if getattr(conn.dialect, "is_mariadb", False):
                conn.exec_driver_sql(f"SET SESSION max_statement_time = {timeout:.3f}")
            else:
                conn.exec_driver_sql(f"SET SESSION max_execution_time = {round(timeout * 1000)}")
            if free:
                mode = conn.exec_driver_sql("SELECT @@SESSION.sql_mode").scalar() or ""
                kept = [m for m in str(mode).split(",") if m not in _MYSQL_LEXING_MODES]
                conn.execute(text("SET SESSION sql_mode = :mode"), {"mode": ",".join(kept)})
            if read_only:
                conn.exec_driver_sql("START TRANSACTION READ ONLY")
        else:
            raw = conn.connection.driver_connection
            raw.set_progress_handler(deadline, SQLITE_PROGRESS_STEPS)
            if read_only:
                conn.exec_driver_sql("PRAGMA query_only = ON")

    def _sqlite_reset(self, conn: Connection) -> None:
        if conn.closed or conn.invalidated:
            return
        conn.connection.driver_connection.set_progress_handler(None, SQLITE_PROGRESS_STEPS)
        conn.exec_driver_sql("PRAGMA query_only = OFF")

    def _fetch_declared(
        self, conn: Connection, sql: str, params: Mapping[str, Any], max_rows: int, *, stream: bool
    ) -> Rows:
        options = conn.execution_options(stream_results=True) if stream else conn
        result = options.execute(text(sql), dict(params))
        if not result.returns_rows:
            return Rows((), [], affected=result.rowcount)
        rows = result.fetchmany(max_rows + 1)
        result.close()
        return Rows(tuple(result.keys()), rows[:max_rows], more=len(rows) > max_rows)

    def _fetch_free(self, conn: Connection, sql: str, max_rows: int) -> Rows:
        dbapi = conn.connection.dbapi_connection
        if self.manifest.dialect == "postgresql":
            cursor = dbapi.cursor(name="chatops_query")  # DECLARE ... CURSOR FOR: one query
        elif self.manifest.dialect == "mysql":
            from pymysql.cursors import SSCursor

            cursor = dbapi.cursor(SSCursor)  # unbuffered: rows are read as fetched
        else:
            cursor = dbapi.cursor()
        try:
            cursor.execute(sql)
            if cursor.description is None:
                return Rows((), [], affected=cursor.rowcount)
            columns = tuple(str(d[0]) for d in cursor.description)
            rows = cursor.fetchmany(max_rows + 1)
        finally:
            _quietly(cursor.close)
        return Rows(columns, rows[:max_rows], more=len(rows) > max_rows)

    def _classify(self, exc: Exception, deadline: _Deadline) -> SqlFailed:
        orig = exc.orig if isinstance(exc, DBAPIError) else exc
        message = _message(exc)
        timeout = f"{self.manifest.timeout_s:g}s"
        dialect = self.manifest.dialect
        code: Any = None
        if dialect == "postgresql":
            code = getattr(orig, "sqlstate", None)
            if code == PG_TIMEOUT:
                return StatementTimeout(f"cut by the statement timeout ({timeout})")
            if code == PG_READ_ONLY:
                return ReadOnlyRefused(message)
        elif dialect == "mysql":
            args = getattr(orig, "args", ())
            code = args[0] if args and isinstance(args[0], int) else None
            if code in MYSQL_TIMEOUTS:
                return StatementTimeout(f"cut by the statement timeout ({timeout})")
            if code == MYSQL_READ_ONLY:
                return ReadOnlyRefused(message)
        else:
            if deadline.hit:
                return StatementTimeout(f"cut by the statement timeout ({timeout})")
            if getattr(orig, "sqlite_errorcode", None) == SQLITE_READONLY:
                return ReadOnlyRefused(message)
        if isinstance(exc, DBAPIError) and exc.connection_invalidated:
            return SqlUnreachable(message)
        return SqlFailed(message)


_MYSQL_LEXING_MODES = frozenset({"NO_BACKSLASH_ESCAPES", "ANSI_QUOTES", "ANSI"})


def _message(exc: BaseException) -> str:
    """The driver's own message (not SQLAlchemy's wrapper, which repeats the statement and
    links to its docs), first line, shortened."""
    orig = getattr(exc, "orig", None) or exc
    args = getattr(orig, "args", ())
    pymysql_pair = len(args) == 2 and isinstance(args[0], int)  # PyMySQL: (errno, message)
    text_ = f"({args[0]}) {args[1]}" if pymysql_pair else str(orig)
    line = next((part.strip() for part in text_.splitlines() if part.strip()), "")
    return (line or type(orig).__name__)[:MESSAGE_CHARS]


def _quietly(action: Any) -> None:
    """Clean-up that must not hide the error being reported (the connection may be gone)."""
    with contextlib.suppress(Exception):  # the first error is the one the model reads
        action()
