"""Is this SQL one read-only statement? sqlglot parses it with the connector's dialect.

The `query` action takes SQL from the model, so this is the first of two locks: only a single
SELECT (or a set operation of SELECTs, or VALUES) passes; no `SELECT ... INTO`, no row locks, no
data-modifying CTE, no function on the deny list (side effects: sleeping, signalling backends,
reading files, large objects, advisory locks, sequences, settings, SQL-in-a-string). Anything
the parser and the database could read differently is refused rather than guessed at:
comments (MySQL runs `/*! ... */` and reads `--1` as minus minus one), non-ASCII characters
outside string literals and quoted identifiers (homoglyph keywords), invisible format
characters anywhere. The second lock is the database's own read-only transaction
(`connectors.sql.database`), which refuses any write that got past this one.
"""

from __future__ import annotations

import logging
import unicodedata

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from bot.errors import ConnectorError
from connectors.sql.manifest import Dialect

SQLGLOT_DIALECTS: dict[str, str] = {"postgresql": "postgres", "mysql": "mysql", "sqlite": "sqlite"}
MAX_SQL_CHARS = 20_000

# functions with side effects or that run SQL hidden in a string, for every dialect (a name
# harmless in one dialect is still refused in another: a query has no need of them)
DENIED_FUNCTIONS = frozenset(
    {
        # PostgreSQL
        "pg_sleep", "pg_sleep_for", "pg_sleep_until", "pg_terminate_backend",
        "pg_cancel_backend", "pg_reload_conf", "pg_rotate_logfile", "pg_read_file",
        "pg_read_binary_file", "pg_ls_dir", "pg_stat_file", "pg_ls_logdir", "pg_ls_waldir",
        "pg_ls_tmpdir", "pg_ls_archive_statusdir", "pg_file_write", "pg_file_rename",
        "pg_file_unlink", "pg_logdir_ls", "lo_import", "lo_export", "lo_create", "lo_creat",
        "lo_unlink", "lo_open", "lo_put", "lo_from_bytea", "lo_truncate", "dblink",
        "dblink_exec", "dblink_connect", "dblink_connect_u", "dblink_send_query",
        "dblink_open", "dblink_fetch", "set_config", "nextval", "setval",
        "pg_advisory_lock", "pg_advisory_lock_shared", "pg_advisory_xact_lock",
        "pg_advisory_xact_lock_shared", "pg_try_advisory_lock", "pg_try_advisory_lock_shared",
        "pg_try_advisory_xact_lock", "pg_try_advisory_xact_lock_shared", "pg_advisory_unlock",
        "pg_advisory_unlock_all", "pg_advisory_unlock_shared", "pg_notify",
        "pg_logical_emit_message", "pg_create_restore_point", "pg_switch_wal",
        "pg_backup_start", "pg_backup_stop", "pg_start_backup", "pg_stop_backup", "pg_promote",
        "pg_wal_replay_pause", "pg_wal_replay_resume", "pg_create_logical_replication_slot",
        "pg_create_physical_replication_slot", "pg_drop_replication_slot",
        "pg_replication_origin_create", "pg_import_system_collations",
        "pg_stat_reset", "pg_stat_reset_shared", "txid_current", "pg_current_xact_id",
        "query_to_xml", "query_to_xmlschema", "query_to_xml_and_xmlschema", "cursor_to_xml",
        "cursor_to_xmlschema", "table_to_xml", "table_to_xml_and_xmlschema", "schema_to_xml",
        "database_to_xml", "database_to_xml_and_xmlschema", "ts_stat",
        # MySQL / MariaDB
        "sleep", "benchmark", "load_file", "get_lock", "release_lock", "release_all_locks",
        "is_free_lock", "is_used_lock", "master_pos_wait", "source_pos_wait",
        "master_gtid_wait", "wait_for_executed_gtid_set", "wait_until_sql_thread_after_gtids",
        "sys_exec", "sys_eval", "sys_get", "sys_set",
        # SQLite
        "load_extension", "readfile", "writefile", "edit", "fts3_tokenizer", "zeroblob",
        "randomblob", "sqlite_offset",
    }
)  # fmt: skip

# statement or clause kinds that write, lock, change the session or run other code
_FORBIDDEN_NAMES = (
    "Insert", "Update", "Delete", "Merge", "Create", "Drop", "Alter", "AlterTable", "Copy",
    "Command", "Into", "Lock", "Set", "SetItem", "Transaction", "Commit", "Rollback", "Use",
    "Pragma", "Grant", "Revoke", "TruncateTable", "LoadData", "Attach", "Detach", "Cache",
    "Uncache", "Refresh", "Execute", "Kill", "Analyze", "Describe", "Show", "Summarize",
    "Export", "Install", "Declare", "Put", "Get",
)  # fmt: skip
FORBIDDEN_NODES: tuple[type[exp.Expression], ...] = tuple(
    node for name in _FORBIDDEN_NAMES if isinstance(node := getattr(exp, name, None), type)
)
READ_ROOTS: tuple[type[exp.Expression], ...] = (exp.Select, exp.SetOperation, exp.Values)
_STRING_TOKENS = ("STRING", "IDENTIFIER")  # token types whose text may be any character


class QueryRefused(ConnectorError):
    """Model-written SQL that is not one read-only statement; the message says why."""


def sqlglot_dialect(dialect: Dialect) -> str:
    return SQLGLOT_DIALECTS[dialect]


def check_read_only(sql: str, dialect: Dialect) -> None:
    """Raise `QueryRefused` unless `sql` is exactly one read-only statement in `dialect`."""
    read = sqlglot_dialect(dialect)
    if not sql.strip():
        raise QueryRefused("the SQL is empty")
    if len(sql) > MAX_SQL_CHARS:
        raise QueryRefused(f"the SQL is longer than {MAX_SQL_CHARS} characters")
    _check_characters(sql)
    _check_tokens(sql, read)
    statements = _parse(sql, read)
    if len(statements) != 1:
        raise QueryRefused(f"one statement only ({len(statements)} found)")
    _check_statement(statements[0])


def is_read_only(sql: str, dialect: Dialect, *, comments: bool = True) -> bool:
    """Whether a declared (operator-written) statement reads only; `comments` allowed there."""
    read = sqlglot_dialect(dialect)
    try:
        statements = _parse(sql, read)
        if len(statements) != 1:
            return False
        if not comments:
            _check_tokens(sql, read)
        _check_statement(statements[0])
    except QueryRefused:
        return False
    return True


def _check_characters(sql: str) -> None:
    for char in sql:
        category = unicodedata.category(char)
        if category == "Cf" or (category == "Cc" and char not in "\t\n\r"):
            raise QueryRefused(
                f"the SQL contains an invisible or control character (U+{ord(char):04X})"
            )


def _check_tokens(sql: str, read: str) -> None:
    """No comments; non-ASCII only inside string literals and quoted identifiers."""
    try:
        tokens = sqlglot.tokenize(sql, read=read)
    except SqlglotError as exc:
        raise QueryRefused(f"the SQL does not parse: {_first_line(exc)}") from None
    for token in tokens:
        if token.comments:
            raise QueryRefused("comments are not allowed in a query (remove /* */ and --)")
        quoted = token.token_type.name.endswith(_STRING_TOKENS)
        if not quoted and not token.text.isascii():
            raise QueryRefused(
                f"non-ASCII characters outside quotes ({token.text[:40]!r}); "
                "quote identifiers that are not ASCII"
            )


def _parse(sql: str, read: str) -> list[exp.Expression]:
    logger = logging.getLogger("sqlglot")
    level = logger.level
    logger.setLevel(logging.ERROR)  # its "falling back to Command" warning: refused below
    try:
        parsed = sqlglot.parse(sql, read=read)
    except SqlglotError as exc:
        raise QueryRefused(f"the SQL does not parse: {_first_line(exc)}") from None
    finally:
        logger.setLevel(level)
    return [statement for statement in parsed if statement is not None]


def _check_statement(statement: exp.Expression) -> None:
    root = statement.unnest() if isinstance(statement, exp.Paren | exp.Subquery) else statement
    if not isinstance(root, READ_ROOTS):
        raise QueryRefused(f"only SELECT statements may run, not {_kind(root)}")
    for node in statement.walk():
        if isinstance(node, FORBIDDEN_NODES):
            raise QueryRefused(f"{_kind(node)} is not allowed in a read-only query")
        if isinstance(node, exp.Func):
            name = _function_name(node)
            if name in DENIED_FUNCTIONS:
                raise QueryRefused(f"the function {name}() has side effects and is not allowed")


def _function_name(node: exp.Func) -> str:
    if isinstance(node, exp.Anonymous):
        return node.name.lower()
    return node.sql_name().lower()


def _kind(node: exp.Expression) -> str:
    names = {"Into": "SELECT ... INTO", "Lock": "a row lock (FOR UPDATE / FOR SHARE)"}
    name = type(node).__name__
    if name == "Command":
        return str(node.this).upper() or "a command"
    return names.get(name, name.upper())


def _first_line(exc: Exception) -> str:
    return (str(exc).splitlines() or ["syntax error"])[0][:200]
