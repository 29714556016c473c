"""The statement guard on its own: what it accepts (the everyday SQL a model writes must
not be refused), what it refuses and why, the write tool's rules, and that no statement
text reaches the logs.
"""

from __future__ import annotations

import logging

import pytest

from mcpkit.servers.sql import Refused, check_read_only, check_write

ACCEPTED_POSTGRES = {
    "select": ("SELECT 1", "query"),
    "trailing-semicolons": ("SELECT 1;;", "query"),
    "placeholders": ("SELECT * FROM t WHERE id = $1 AND name = ANY($2)", "query"),
    "with": ("WITH x AS (SELECT 1 AS n) SELECT n FROM x", "query"),
    "with-recursive": (
        "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 5) SELECT * FROM r",
        "query",
    ),
    "values": ("VALUES (1, 'a'), (2, 'b')", "query"),
    "table": ("TABLE t", "query"),
    "set-operation": ("(SELECT 1) UNION (SELECT 2) ORDER BY 1 LIMIT 1", "query"),
    "distinct-on": ("SELECT DISTINCT ON (a) a, b FROM t ORDER BY a, b DESC", "query"),
    "window": ("SELECT a, row_number() OVER (PARTITION BY b ORDER BY c) FROM t", "query"),
    "filter": ("SELECT count(*) FILTER (WHERE x > 1) FROM t", "query"),
    "lateral": ("SELECT * FROM t, LATERAL (SELECT t.a + 1 AS b) s", "query"),
    "json": ("SELECT data->>'name', data #> '{a,b}' FROM t WHERE data ? 'k'", "query"),
    "casts": ("SELECT '1'::int, CAST(now() AS date), ARRAY[1, 2]::int[]", "query"),
    "fetch-first": ("SELECT * FROM t ORDER BY id FETCH FIRST 3 ROWS ONLY", "query"),
    "pg-sleep-left-to-the-timeout": ("SELECT pg_sleep(1)", "query"),
    "a-keyword-in-a-string": ("SELECT 'DROP TABLE t; DELETE FROM t' AS text", "query"),
    "a-keyword-in-a-comment": ("SELECT 1 /* DELETE FROM t */ -- DROP", "query"),
    "catalog": ("SELECT * FROM information_schema.columns WHERE table_name = 't'", "query"),
    "explain": ("EXPLAIN SELECT * FROM t", "explain"),
    "explain-options": ("EXPLAIN (ANALYZE, BUFFERS OFF, FORMAT JSON) SELECT * FROM t", "explain"),
    "explain-analyze-verbose": ("EXPLAIN ANALYZE VERBOSE SELECT 1", "explain"),
    "show": ("SHOW search_path", "show"),
    "show-all": ("SHOW ALL;", "show"),
}


@pytest.mark.parametrize("sql, kind", ACCEPTED_POSTGRES.values(), ids=ACCEPTED_POSTGRES.keys())
def test_postgres_queries_are_accepted_unchanged(sql: str, kind: str) -> None:
    checked = check_read_only(sql, "postgres")
    assert (checked.sql, checked.kind) == (sql, kind)


ACCEPTED_SQLITE = {
    "select": ("SELECT * FROM t WHERE id = ?", "query"),
    "named": ("SELECT * FROM t WHERE id = :id", "query"),
    "recursive": (
        "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT n FROM r LIMIT 3",
        "query",
    ),
    "explain-query-plan": ("EXPLAIN QUERY PLAN SELECT * FROM t", "explain"),
    "pragma-table-info": ("PRAGMA table_info(t)", "pragma"),
    "pragma-qualified": ('PRAGMA main.index_list("t")', "pragma"),
}


@pytest.mark.parametrize("sql, kind", ACCEPTED_SQLITE.values(), ids=ACCEPTED_SQLITE.keys())
def test_sqlite_queries_are_accepted_unchanged(sql: str, kind: str) -> None:
    checked = check_read_only(sql, "sqlite")
    assert (checked.sql, checked.kind) == (sql, kind)


REFUSED = {
    "empty": ("postgres", "  -- nothing\n", "empty"),
    "two-statements": ("postgres", "SELECT 1; SELECT 2", "multiple-statements"),
    "unparseable": ("postgres", "SELEC 1", "unparseable"),
    "insert": ("postgres", "INSERT INTO t VALUES (1)", "not-read-only"),
    "writable-cte": ("postgres", "WITH d AS (DELETE FROM t RETURNING *) SELECT * FROM d", "writable-cte"),
    "select-into": ("postgres", "SELECT * INTO u FROM t", "select-into"),
    "for-update": ("postgres", "SELECT * FROM t FOR UPDATE", "row-lock"),
    "lo-import": ("postgres", "SELECT lo_import('/etc/passwd')", "denied-function"),
    "lo-import-in-a-literal": ("postgres", "SELECT 'lo_import' AS name", "denied-function"),
    "unicode-identifier": ("postgres", 'SELECT U&"x" FROM t', "unicode-identifier"),
    "explain-option": ("postgres", "EXPLAIN (WHATEVER) SELECT 1", "explain-option"),
    "explain-of-delete": ("postgres", "EXPLAIN DELETE FROM t", "not-read-only"),
    "show-expression": ("postgres", "SHOW (SELECT 1)", "unparseable"),
    "pragma-setting": ("sqlite", "PRAGMA user_version = 1", "not-read-only"),
    "pragma-unknown": ("sqlite", "PRAGMA writable_schema", "not-read-only"),
    "attach": ("sqlite", "ATTACH 'x.db' AS x", "not-read-only"),
    "load-extension": ("sqlite", "SELECT load_extension('x')", "denied-function"),
}


@pytest.mark.parametrize("dialect, sql, reason", REFUSED.values(), ids=REFUSED.keys())
def test_refusals_say_why(dialect: str, sql: str, reason: str) -> None:
    with pytest.raises(Refused) as info:
        check_read_only(sql, dialect)  # type: ignore[arg-type]
    assert info.value.reason == reason
    assert str(info.value)


def test_overlong_statements_are_refused() -> None:
    with pytest.raises(Refused) as info:
        check_read_only("SELECT " + "1 + " * 100 + "1", "postgres", max_length=50)
    assert info.value.reason == "too-long" and "--max-sql-length" in str(info.value)


@pytest.mark.parametrize(
    "sql",
    [
        "INSERT INTO t VALUES ($1)",
        "UPDATE t SET a = 1 WHERE id = 2",
        "DELETE FROM t",
        "CREATE TABLE u (a int)",
        "WITH d AS (DELETE FROM t RETURNING *) INSERT INTO u SELECT * FROM d",
    ],
)
def test_the_write_tool_accepts_one_write(sql: str) -> None:
    assert check_write(sql, "postgres").kind == "write"


@pytest.mark.parametrize(
    "dialect, sql, reason",
    [
        ("postgres", "INSERT INTO t VALUES (1); DROP TABLE t", "multiple-statements"),
        ("postgres", "COMMIT", "transaction-control"),
        ("postgres", "BEGIN", "transaction-control"),
        ("postgres", "SAVEPOINT s", "transaction-control"),
        ("postgres", "SET ROLE postgres", "not-allowed"),
        ("postgres", "COPY t TO PROGRAM 'id'", "not-allowed"),
        ("postgres", "DO $$BEGIN END$$", "not-allowed"),
        ("postgres", "SELECT lo_export(1, '/tmp/x')", "denied-function"),
        ("sqlite", "ATTACH 'x.db' AS x", "not-allowed"),
        ("sqlite", "SELECT load_extension('x')", "denied-function"),
    ],
)
def test_the_write_tool_refuses_what_reaches_past_the_data(dialect: str, sql: str, reason: str) -> None:
    with pytest.raises(Refused) as info:
        check_write(sql, dialect)  # type: ignore[arg-type]
    assert info.value.reason == reason


def test_statements_stay_out_of_the_logs(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG):
        check_read_only("EXPLAIN SELECT 'secret-value-1'", "postgres")
        check_read_only("SHOW secret_value_2", "postgres")
        with pytest.raises(Refused):
            check_read_only("VACUUM secret_value_3", "postgres")
    assert "secret" not in caplog.text
