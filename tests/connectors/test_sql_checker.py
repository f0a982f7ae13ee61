"""The `query` action's checker: a table of hostile statements, refused for each dialect, and
the ordinary queries a model writes, allowed. (The same table runs against the real databases
in test_sql_databases.py, which also checks that nothing changed.)"""

from __future__ import annotations

import pytest

from connectors.sql.checker import QueryRefused, check_read_only, is_read_only

# for every dialect: writes, multi-statements, comment tricks, locks, INTO, homoglyphs
COMMON_HOSTILE = [
    "DELETE FROM items",
    "UPDATE items SET name = 'x'",
    "INSERT INTO items VALUES (9, 'x', 'y')",
    "DROP TABLE items",
    "CREATE TABLE evil (id INTEGER)",
    "ALTER TABLE items ADD COLUMN evil INTEGER",
    "TRUNCATE TABLE items",
    "SELECT 1; DROP TABLE items",
    "SELECT 1;DROP TABLE items;",
    "SELECT 1 /* */; DROP TABLE items",
    "SELECT 1 -- a comment\n; DROP TABLE items",
    "SELECT * FROM items /* just a comment */",
    "SELECT * FROM items -- just a comment",
    "SELECT 1 /* a /* b */ ; DROP TABLE items */",
    "/**/DELETE/**/FROM items",
    "WITH gone AS (DELETE FROM items RETURNING *) SELECT * FROM gone",
    "SELECT * INTO evil FROM items",
    "SELECT * FROM items FOR UPDATE",
    "SELECT * FROM items FOR SHARE",
    "(SELECT 1); DELETE FROM items",
    "SELECT 1 UNION SELECT 2; DELETE FROM items",
    "D\u0395LETE FROM items",  # Greek capital epsilon
    "\uff33\uff25\uff2c\uff25\uff23\uff34 1",  # fullwidth SELECT
    "SELECT * FROM items WHERE name = 'a'\u202e; DROP TABLE items",  # right-to-left override
    "SEL\u200bECT 1",  # zero-width space
    "SELECT 1\x00; DROP TABLE items",
    "BEGIN",
    "COMMIT",
    "ROLLBACK",
    "GRANT SELECT ON items TO PUBLIC",
    "EXPLAIN ANALYZE DELETE FROM items",
    "CALL evil()",
    "MERGE INTO items USING items AS s ON TRUE WHEN MATCHED THEN DELETE",
    "",
    "   ",
]

DIALECT_HOSTILE = {
    "postgresql": [
        "COPY items TO PROGRAM 'touch /tmp/chatops-pwned'",
        "COPY (SELECT 1) TO '/tmp/chatops-pwned'",
        "COPY items FROM '/etc/passwd'",
        "SELECT pg_sleep(10)",
        "SELECT PG_SLEEP(10)",
        "SELECT pg_catalog.pg_sleep(10)",
        'SELECT "pg_sleep"(10)',
        "SELECT * FROM pg_sleep(10)",
        "SELECT (SELECT pg_terminate_backend(pid) FROM pg_stat_activity LIMIT 1)",
        "SELECT pg_cancel_backend(1)",
        "SELECT pg_read_file('/etc/passwd')",
        "SELECT lo_import('/etc/passwd')",
        "SELECT lo_export(1, '/tmp/x')",
        "SELECT set_config('statement_timeout', '0', false)",
        "SELECT nextval('items_seq')",
        "SELECT setval('items_seq', 1)",
        "SELECT dblink_exec('dbname=test', 'DROP TABLE items')",
        "SELECT * FROM dblink('dbname=test', 'SELECT 1') AS t(x int)",
        "SELECT query_to_xml('DELETE FROM items RETURNING 1', true, true, '')",
        "SELECT pg_advisory_lock(1)",
        "SELECT pg_notify('chan', 'x')",
        "SELECT 1 UNION ALL SELECT pg_sleep(10)::text::int",
        # E'' escapes: a backslash ends a standard string but escapes inside an E string
        "SELECT 'a\\' ; DROP TABLE items --'",
        "SELECT E'\\\\' ; DROP TABLE items --'",
        "SELECT E'\\'' ; DROP TABLE items; SELECT '",
        # dollar quoting that closes early
        "SELECT $$a$$; DROP TABLE items; SELECT $$b$$",
        "SELECT $t$ x $t$; DROP TABLE items",
        "SET statement_timeout = 0",
        "SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE",
        "LOCK TABLE items",
        "LISTEN chan",
        "DO $$ BEGIN DELETE FROM items; END $$",
        "PREPARE p AS DELETE FROM items",
        "VACUUM items",
    ],
    "mysql": [
        "SELECT SLEEP(10)",
        "SELECT sleep(10)",
        "SELECT BENCHMARK(1000000000, MD5('x'))",
        "SELECT LOAD_FILE('/etc/passwd')",
        "SELECT GET_LOCK('x', 10)",
        "SELECT RELEASE_ALL_LOCKS()",
        "SELECT * FROM items INTO OUTFILE '/tmp/chatops-pwned'",
        "SELECT * FROM items INTO DUMPFILE '/tmp/chatops-pwned'",
        "SELECT id INTO @x FROM items LIMIT 1",
        "LOAD DATA INFILE '/etc/passwd' INTO TABLE items",
        "REPLACE INTO items VALUES (1, 'x', 'y')",
        "DO SLEEP(10)",
        "HANDLER items OPEN",
        "SET GLOBAL max_connections = 1",
        "SET SESSION sql_mode = 'NO_BACKSLASH_ESCAPES'",
        "LOCK TABLES items WRITE",
        # executable comments: MySQL and MariaDB run what is inside them
        "SELECT /*! SLEEP(10) */ 1",
        "SELECT 1 /*!50000 ; DROP TABLE items */",
        "SELECT 1 /*M! , SLEEP(10) */",
        "SELECT 1 # a comment\n; DROP TABLE items",
        # a backslash escapes a quote in MySQL strings; a doubled one does not
        "SELECT 'a\\\\' ; DROP TABLE items; -- '",
        'SELECT "a\\\\" ; DROP TABLE items; -- "',
        "SELECT 'a' ; DROP TABLE items; -- \\'",
        "SHOW GRANTS",
        "KILL 1",
        "FLUSH TABLES",
    ],
    "sqlite": [
        "SELECT load_extension('/tmp/evil.so')",
        "SELECT writefile('/tmp/chatops-pwned', 'x')",
        "SELECT readfile('/etc/passwd')",
        "SELECT zeroblob(1000000000)",
        "ATTACH DATABASE '/tmp/chatops-pwned.db' AS evil",
        "DETACH DATABASE main",
        "PRAGMA query_only = 0",
        "PRAGMA writable_schema = 1",
        "VACUUM INTO '/tmp/chatops-pwned.db'",
        "REPLACE INTO items VALUES (1, 'x', 'y')",
        "INSERT OR REPLACE INTO items VALUES (1, 'x', 'y')",
        "REINDEX items",
        "ANALYZE",
        # SQLite strings know no backslash escape: the quote after it ends the string
        "SELECT 'a\\' ; DROP TABLE items --'",
    ],
}

ALLOWED = {
    "postgresql": [
        "SELECT 1",
        "SELECT id, name FROM items WHERE colour = 'red' ORDER BY id DESC LIMIT 10",
        "WITH r AS (SELECT * FROM items WHERE id > 1) SELECT count(*) FROM r",
        "SELECT colour, count(*) FROM items GROUP BY colour HAVING count(*) > 0",
        "SELECT * FROM items i JOIN items j ON i.id = j.id",
        "SELECT now(), current_date, '1'::int, coalesce(NULL, 'x')",
        "SELECT 'it''s; DROP TABLE items --'",
        "SELECT E'a\\'; DROP TABLE items --'",
        "SELECT $$; DROP TABLE items$$",
        "(SELECT 1) UNION (SELECT 2)",
        "VALUES (1, 'a'), (2, 'b')",
        'SELECT * FROM "ユーザー"',
        "SELECT 1;",
    ],
    "mysql": [
        "SELECT 1",
        "SELECT id, name FROM items WHERE colour = 'red' ORDER BY id DESC LIMIT 10",
        "SELECT `name` FROM `items`",
        "SELECT 'a\\' ; DROP TABLE items -- '",
        "SELECT DATE_FORMAT(NOW(), '%Y'), CONCAT('a', 'b')",
    ],
    "sqlite": [
        "SELECT 1",
        "SELECT id, name FROM items WHERE colour = 'red' ORDER BY id DESC LIMIT 10",
        "SELECT count(*), group_concat(name) FROM items",
        "SELECT strftime('%Y', 'now'), typeof(1)",
    ],
}

HOSTILE = [(d, sql) for d in DIALECT_HOSTILE for sql in COMMON_HOSTILE + DIALECT_HOSTILE[d]]


@pytest.mark.parametrize(("dialect", "sql"), HOSTILE)
def test_hostile_statements_are_refused(dialect: str, sql: str) -> None:
    with pytest.raises(QueryRefused) as refused:
        check_read_only(sql, dialect)  # type: ignore[arg-type]
    assert str(refused.value)  # a reason the model can read


@pytest.mark.parametrize(("dialect", "sql"), [(d, s) for d in ALLOWED for s in ALLOWED[d]])
def test_ordinary_queries_pass(dialect: str, sql: str) -> None:
    check_read_only(sql, dialect)  # type: ignore[arg-type]


def test_refusals_say_why() -> None:
    def why(sql: str, dialect: str = "postgresql") -> str:
        with pytest.raises(QueryRefused) as refused:
            check_read_only(sql, dialect)  # type: ignore[arg-type]
        return str(refused.value)

    assert why("SELECT 1; DROP TABLE items") == "one statement only (2 found)"
    assert "pg_sleep()" in why("SELECT pg_sleep(1)")
    assert "SELECT ... INTO" in why("SELECT * INTO evil FROM items")
    assert "DELETE" in why("WITH g AS (DELETE FROM items RETURNING *) SELECT * FROM g")
    assert "comments" in why("SELECT /*! SLEEP(1) */ 1", "mysql")
    assert "U+202E" in why("SELECT 1\u202e")
    assert "quote identifiers" in why("D\u0395LETE FROM items")


def test_declared_statements_are_judged_for_their_default_marking() -> None:
    """A declared action's `mutating` defaults to what its SQL does; comments are fine there."""
    assert is_read_only("SELECT * FROM items WHERE id = :id -- by id", "postgresql")
    assert not is_read_only("UPDATE items SET name = :name WHERE id = :id", "postgresql")
    assert not is_read_only("SELECT 1; SELECT 2", "sqlite")
    assert not is_read_only("SELECT nextval('s')", "postgresql")
