"""The sql server on PostgreSQL: the attack battery of issue 14, the layers under the
guard (each shown to hold with the guard bypassed), the documented read-only role,
limits, timeouts, parameters, errors and the write mode.

Every attack asserts that nothing changed: the tables' contents, the relations,
functions, large objects, sequences, grants, roles, advisory locks, and no file
created on the database server's filesystem.
"""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from test_sql_support import pg_snapshot, pg_url, refused, text

from mcpkit import Client
from mcpkit.servers.sql import Checked, Limits, build_server, open_backend
from mcpkit.servers.sql.backends import DatabaseError
from mcpkit.servers.sql.postgres import PostgresBackend

__all__ = ["pg_url"]  # the fixture, imported for pytest

DOCS = Path(__file__).resolve().parents[2] / "docs" / "servers" / "sql.md"


@pytest.fixture
def backend(pg_url: str) -> Iterator[PostgresBackend]:
    backend = open_backend(pg_url, Limits(statement_timeout=2.0, max_rows=50))
    assert isinstance(backend, PostgresBackend)
    yield backend
    backend.close()


@pytest.fixture
def marker() -> Path:
    """A file an attack would make the database server create."""
    return Path(f"/tmp/mcpkit_sql_{uuid.uuid4().hex}")


# -- the attack battery, through the query tool --------------------------------------------

ATTACKS = {
    # Statement stacking: the archived community server's confirmed injection.
    "commit-then-drop": "COMMIT; DROP TABLE victims",
    "select-then-delete": "SELECT 1; DELETE FROM victims",
    "rollback-then-grant": "ROLLBACK; GRANT ALL ON victims TO PUBLIC",
    "stack-after-comment": "SELECT 1 /* harmless */; DELETE FROM victims",
    "stack-after-line-comment": "SELECT 1 -- harmless\n; DELETE FROM victims",
    "stack-after-string": "SELECT ';' AS x; DELETE FROM victims",
    "stack-after-dollar-quote": "SELECT $$;$$ AS x; DELETE FROM victims",
    "stack-after-nested-comment": "SELECT 1 /* /* */ ; */; DELETE FROM victims",
    # Writable CTEs.
    "cte-delete": "WITH d AS (DELETE FROM victims RETURNING *) SELECT * FROM d",
    "cte-insert": "WITH i AS (INSERT INTO victims VALUES (9, 'mallory') RETURNING *) SELECT * FROM i",
    "cte-update": "WITH u AS (UPDATE victims SET name = 'x' RETURNING 1) SELECT count(*) FROM u",
    "cte-nested": "WITH a AS (SELECT 1), b AS (DELETE FROM victims RETURNING 1) SELECT * FROM a",
    # SELECT ... INTO creates a table.
    "select-into": "SELECT * INTO stolen FROM victims",
    "select-into-temp": "SELECT * INTO TEMP stolen FROM victims",
    # COPY to the server's files and programs.
    "copy-to-program": "COPY victims TO PROGRAM 'touch MARKER'",
    "copy-query-to-program": "COPY (SELECT 1) TO PROGRAM 'touch MARKER'",
    "copy-to-file": "COPY victims TO 'MARKER'",
    "copy-from-program": "COPY victims FROM PROGRAM 'echo 9,mallory'",
    # Code and roles.
    "create-function": (
        "CREATE FUNCTION pwn() RETURNS int LANGUAGE sql AS 'DELETE FROM victims RETURNING 1'"
    ),
    "create-function-stacked": "SELECT 1; CREATE FUNCTION pwn() RETURNS int LANGUAGE sql AS 'SELECT 1'",
    "do-block": "DO $$BEGIN DELETE FROM victims; END$$",
    "set-role": "SET ROLE postgres",
    "set-session-authorization": "SET SESSION AUTHORIZATION postgres",
    "reset-read-only": "SET default_transaction_read_only = off",
    "set-config-read-only-off": "SELECT set_config('default_transaction_read_only', 'off', false)",
    "alter-system": "ALTER SYSTEM SET work_mem = '1GB'",
    "grant": "GRANT ALL ON victims TO PUBLIC",
    "comment-on": "COMMENT ON TABLE victims IS 'pwned'",
    # Functions a READ ONLY transaction lets run.
    "lo-import": "SELECT lo_import('/etc/hostname')",
    "lo-import-read-back": "SELECT convert_from(lo_get(lo_import('/etc/hostname')), 'UTF8')",
    "lo-export": "SELECT lo_export(lo_from_bytea(0, 'x'), 'MARKER')",
    "pg-read-file": "SELECT pg_read_file('/etc/hostname')",
    "pg-read-binary-file": "SELECT pg_read_binary_file('/etc/hostname')",
    "pg-ls-dir": "SELECT pg_ls_dir('.')",
    "dblink-exec": "SELECT dblink_exec('dbname=' || current_database(), 'DROP TABLE victims')",
    "dblink-exec-qualified": (
        "SELECT public.dblink_exec('dbname=' || current_database(), 'DELETE FROM victims')"
    ),
    "dblink-exec-split-keyword": (
        "SELECT dblink_exec('dbname=' || current_database(), 'DEL' || 'ETE FROM victims')"
    ),
    "query-to-xml": "SELECT query_to_xml('DELETE FROM victims RETURNING 1', true, false, '')",
    "advisory-lock": "SELECT pg_advisory_lock(42)",
    "nextval": "SELECT nextval('counter')",
    "setval": "SELECT setval('counter', 99)",
    # Locks.
    "for-update": "SELECT * FROM victims FOR UPDATE",
    "for-share": "SELECT * FROM victims FOR SHARE",
    "for-no-key-update": "SELECT * FROM victims FOR NO KEY UPDATE SKIP LOCKED",
    "lock-table": "LOCK TABLE victims IN ACCESS EXCLUSIVE MODE",
    # EXPLAIN ANALYZE runs what it explains.
    "explain-analyze-delete": "EXPLAIN ANALYZE DELETE FROM victims",
    "explain-analyze-cte": "EXPLAIN ANALYZE WITH d AS (DELETE FROM victims RETURNING 1) SELECT * FROM d",
    "explain-then-delete": "EXPLAIN SELECT 1; DELETE FROM victims",
    # Lexing tricks: names the parser might not see.
    "backslash-literal": r"SELECT '\', lo_import('/etc/hostname') -- '",
    "e-string-literal": r"SELECT E'\'', pg_read_file('/etc/hostname') -- '",
    "unicode-escaped-name": "SELECT U&\"lo\\005fimport\"('/etc/hostname')",
    "upper-case-name": "SELECT LO_IMPORT('/etc/hostname')",
    # Plain writes and the rest.
    "delete": "DELETE FROM victims",
    "truncate": "TRUNCATE victims",
    "drop": "DROP TABLE victims",
    "insert": "INSERT INTO victims VALUES (9, 'mallory')",
    "merge": "MERGE INTO victims v USING (SELECT 1 AS id) s ON v.id = s.id WHEN MATCHED THEN DELETE",
    "create-temp-table": "CREATE TEMP TABLE t (x int)",
    "begin-read-write": "BEGIN READ WRITE",
    "prepare": "PREPARE p AS DELETE FROM victims",
    "vacuum": "VACUUM victims",
    "notify": "NOTIFY channel",
    "unparseable": "SELECT FROM WHERE (",
}


@pytest.mark.parametrize("sql", ATTACKS.values(), ids=ATTACKS.keys())
async def test_attack_is_refused_and_nothing_changes(
    backend: PostgresBackend, pg_url: str, marker: Path, sql: str
) -> None:
    before = pg_snapshot(pg_url)
    async with Client(build_server(backend)) as client:
        error = await refused(client.call_tool("query", {"sql": sql.replace("MARKER", str(marker))}))
        assert error.message.startswith("Refused: "), error.message
        assert error.data["reason"]
        # Still serving, and the next statement's transaction is still read-only.
        after = await client.call_tool("query", {"sql": "SHOW transaction_read_only"})
        assert json.loads(text(after)) == [{"transaction_read_only": "on"}]
    assert pg_snapshot(pg_url) == before
    assert not marker.exists()


async def test_the_battery_through_a_real_stdio_process(pg_url: str, marker: Path) -> None:
    """The same battery as a host runs it: ``python -m mcpkit.servers.sql URL`` over stdio."""
    from test_sql_support import SERVER, subprocess_env

    before = pg_snapshot(pg_url)
    async with Client([*SERVER, pg_url], env=subprocess_env()) as client:
        for name, sql in ATTACKS.items():
            error = await refused(client.call_tool("query", {"sql": sql.replace("MARKER", str(marker))}))
            assert error.message.startswith("Refused: "), (name, error.message)
        assert json.loads(text(await client.call_tool("query", {"sql": "SELECT count(*) AS n FROM victims"})))
    assert pg_snapshot(pg_url) == before
    assert not marker.exists()


async def test_pg_sleep_is_cut_by_the_statement_timeout(pg_url: str) -> None:
    backend = open_backend(pg_url, Limits(statement_timeout=1.0))
    async with Client(build_server(backend)) as client:
        started = time.monotonic()
        error = await refused(client.call_tool("query", {"sql": "SELECT pg_sleep(60)"}))
        assert time.monotonic() - started < 10
        assert error.data["sqlstate"] == "57014"
        assert "statement timeout" in error.message and "--statement-timeout" in error.message
        # A heavy computation is cut the same way.
        heavy = "SELECT count(*) FROM generate_series(1, 10000000000) a"
        assert (await refused(client.call_tool("query", {"sql": heavy}))).data["sqlstate"] == "57014"
        # The connection is back, and nothing of either statement still runs on the server.
        assert json.loads(text(await client.call_tool("query", {"sql": "SELECT 1 AS one"}))) == [{"one": 1}]
    with psycopg.connect(pg_url) as conn:
        running = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query LIKE '%pg_sleep(60)%' "
            "AND pid <> pg_backend_pid()"
        ).fetchone()
        assert running == (0,)


# -- the layers under the guard ---------------------------------------------------------------

BYPASSES = {
    # The extended protocol takes exactly one statement (the server parses it).
    "stacked-extended-protocol": ("COMMIT; DROP TABLE victims", "show", "42601"),
    "stacked-cursor": ("COMMIT; DROP TABLE victims", "query", "42601"),
    # The READ ONLY transaction refuses writes.
    "delete": ("DELETE FROM victims", "show", "25006"),
    "writable-cte": ("WITH d AS (DELETE FROM victims RETURNING *) SELECT * FROM d", "show", "25006"),
    "select-into": ("SELECT * INTO stolen FROM victims", "show", "25006"),
    "create-table": ("CREATE TABLE pwned (x int)", "show", "25006"),
    "nextval": ("SELECT nextval('counter')", "show", "25006"),
    # DECLARE CURSOR takes only a query.
    "cursor-writable-cte": ("WITH d AS (DELETE FROM victims RETURNING *) SELECT * FROM d", "query", None),
    "cursor-select-into": ("SELECT * INTO stolen FROM victims", "query", "42601"),
}


@pytest.mark.parametrize("sql, kind, sqlstate", BYPASSES.values(), ids=BYPASSES.keys())
def test_with_the_guard_bypassed_the_database_still_refuses(
    backend: PostgresBackend, pg_url: str, sql: str, kind: str, sqlstate: str | None
) -> None:
    before = pg_snapshot(pg_url)
    with pytest.raises(DatabaseError) as info:
        backend.query(Checked(sql, kind), [])  # type: ignore[arg-type]
    if sqlstate is not None:
        assert info.value.data["sqlstate"] == sqlstate, info.value
    assert pg_snapshot(pg_url) == before


def test_a_statement_that_ends_the_transaction_is_caught_and_its_connection_dropped(
    backend: PostgresBackend, pg_url: str
) -> None:
    before = pg_snapshot(pg_url)
    with pytest.raises(DatabaseError, match="left the server's transaction"):
        backend.query(Checked("COMMIT", "show"), [])
    # The next read gets a fresh connection, read-only as ever.
    rows = backend.query(Checked("SHOW transaction_read_only", "show"), [])
    assert rows.rows == [{"transaction_read_only": "on"}]
    assert pg_snapshot(pg_url) == before


def test_what_the_transaction_lets_run_its_rollback_undoes(backend: PostgresBackend, pg_url: str) -> None:
    before = pg_snapshot(pg_url)
    imported = backend.query(Checked("SELECT lo_import('/etc/hostname') AS oid", "show"), [])
    assert imported.rows[0]["oid"]  # it ran, inside the read-only transaction...
    changed = backend.query(
        Checked("SELECT set_config('default_transaction_read_only', 'off', false) AS v", "show"), []
    )
    assert changed.rows == [{"v": "off"}]
    # ...and the rollback took the large object and the setting back.
    assert pg_snapshot(pg_url) == before
    rows = backend.query(Checked("SHOW default_transaction_read_only", "show"), [])
    assert rows.rows == [{"default_transaction_read_only": "on"}]


# -- the documented role -------------------------------------------------------------------------


def documented_role_sql() -> str:
    """The SQL of docs/servers/sql.md's "A dedicated read-only role" section."""
    page = DOCS.read_text()
    section = page.split("## A dedicated read-only role", 1)[1]
    match = re.search(r"```sql\n(.*?)```", section, re.S)
    assert match is not None, "the role section has no sql block"
    return match.group(1)


@pytest.fixture
def reader_url(pg_url: str) -> Iterator[str]:
    role = f"mcp_reader_{uuid.uuid4().hex[:8]}"
    database = pg_url.rsplit("/", 1)[1]
    sql = documented_role_sql().replace("mcp_reader", role).replace("mydb", database)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(sql)  # type: ignore[call-overload]
    try:
        yield f"postgresql://{role}@127.0.0.1:5432/{database}"
    finally:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f'DROP OWNED BY "{role}"')  # type: ignore[call-overload]
            conn.execute(f'DROP ROLE "{role}"')  # type: ignore[call-overload]


ROLE_REFUSES = {
    "copy-to-program": "COPY (SELECT 1) TO PROGRAM 'touch MARKER'",
    "copy-to-file": "COPY victims TO 'MARKER'",
    "lo-import": "SELECT lo_import('/etc/hostname')",
    "lo-export": "SELECT lo_export(lo_from_bytea(0, 'x'), 'MARKER')",
    "pg-read-file": "SELECT pg_read_file('/etc/hostname')",
    "dblink-exec": "SELECT dblink_exec('dbname=' || current_database(), 'DELETE FROM victims')",
    "delete": "DELETE FROM victims",
    "create-table": "CREATE TABLE pwned (x int)",
}


@pytest.mark.parametrize("sql", ROLE_REFUSES.values(), ids=ROLE_REFUSES.keys())
def test_the_documented_role_refuses_what_the_guard_refuses(
    reader_url: str, pg_url: str, marker: Path, sql: str
) -> None:
    """With the guard bypassed, and even through the write path (READ WRITE transaction),
    the database itself refuses: the role is a layer of its own."""
    backend = open_backend(reader_url, Limits(statement_timeout=5.0), allow_write=True)
    try:
        before = pg_snapshot(pg_url)
        statement = sql.replace("MARKER", str(marker))
        with pytest.raises(DatabaseError):
            backend.query(Checked(statement, "show"), [])
        with pytest.raises(DatabaseError):
            backend.execute(Checked(statement, "write"), [])
        assert pg_snapshot(pg_url) == before
        assert not marker.exists()
        assert backend.query(Checked("SELECT count(*) AS n FROM victims", "query"), []).rows == [{"n": 3}]
    finally:
        backend.close()


def test_a_superuser_connection_is_warned_about_and_the_role_is_not(
    pg_url: str, reader_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="mcpkit.servers.sql"):
        open_backend(pg_url, Limits()).close()
    assert "dedicated read-only role" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="mcpkit.servers.sql"):
        open_backend(reader_url, Limits()).close()
    assert caplog.text == ""


# -- results, limits, parameters, errors ----------------------------------------------------------


async def test_rows_are_cut_at_the_row_limit_without_running_the_whole_query(pg_url: str) -> None:
    backend = open_backend(pg_url, Limits(max_rows=5, statement_timeout=5.0))
    async with Client(build_server(backend)) as client:
        started = time.monotonic()
        # A hundred million rows: fetched through a cursor, no further than the limit.
        result = await client.call_tool("query", {"sql": "SELECT generate_series(1, 100000000) AS n"})
        assert time.monotonic() - started < 5
        assert json.loads(text(result)) == [{"n": n} for n in range(1, 6)]
        assert result.content[1].text.startswith("Only the first 5 rows are shown")
        assert "--max-rows" in result.content[1].text


async def test_rows_are_cut_at_the_byte_limit(pg_url: str) -> None:
    backend = open_backend(pg_url, Limits(max_bytes=1000))
    async with Client(build_server(backend)) as client:
        result = await client.call_tool(
            "query", {"sql": "SELECT repeat('x', 100) AS s FROM generate_series(1, 50)"}
        )
        rows = json.loads(text(result))
        assert 0 < len(rows) < 50
        assert len(result.content[0].text.encode()) <= 1000
        assert "--max-bytes" in result.content[1].text


async def test_parameters_are_bound_not_spliced(backend: PostgresBackend, pg_url: str) -> None:
    async with Client(build_server(backend)) as client:
        found = await client.call_tool(
            "query", {"sql": "SELECT name FROM victims WHERE id = $1 OR name = $2", "params": [2, "carol"]}
        )
        assert json.loads(text(found)) == [{"name": "bob"}, {"name": "carol"}]
        injection = "x'; DROP TABLE victims; --"
        none = await client.call_tool(
            "query", {"sql": "SELECT * FROM victims WHERE name = $1", "params": [injection]}
        )
        assert json.loads(text(none)) == []
        # A name the guard refuses in the text is fine as a value.
        value = await client.call_tool("query", {"sql": "SELECT $1::text AS v", "params": ["lo_import"]})
        assert json.loads(text(value)) == [{"v": "lo_import"}]
        # Lists become arrays, objects jsonb.
        typed = await client.call_tool(
            "query", {"sql": "SELECT $1::int[] AS a, $2::jsonb -> 'k' AS j", "params": [[1, 2], {"k": "v"}]}
        )
        assert json.loads(text(typed)) == [{"a": [1, 2], "j": "v"}]
    assert pg_snapshot(pg_url)["victims"] == [(1, "alice"), (2, "bob"), (3, "carol")]


async def test_values_come_back_as_json(backend: PostgresBackend) -> None:
    async with Client(build_server(backend)) as client:
        result = await client.call_tool(
            "query",
            {
                "sql": "SELECT 1.50::numeric AS n, '2025-01-02'::date AS d, '\\x0102'::bytea AS b, "
                "'{\"a\": 1}'::jsonb AS j, NULL AS z, 'NaN'::float8 AS f, 1 AS dup, 2 AS dup"
            },
        )
        assert json.loads(text(result)) == [
            {
                "n": "1.50",
                "d": "2025-01-02",
                "b": "\\x0102",
                "j": {"a": 1},
                "z": None,
                "f": "nan",
                "dup": 1,
                "dup_2": 2,
            }
        ]


async def test_unknown_tables_answer_the_tables_there_are(backend: PostgresBackend) -> None:
    async with Client(build_server(backend)) as client:
        error = await refused(client.call_tool("query", {"sql": "SELECT * FROM nonexistent"}))
        assert error.message == 'relation "nonexistent" does not exist'
        assert error.data["sqlstate"] == "42P01"
        assert error.data["availableTables"] == ["orders", "victims", "sales.regions"]
        error = await refused(client.call_tool("describe_table", {"table_name": "nonexistent"}))
        assert error.message == "Table 'nonexistent' does not exist"
        assert error.data == {"availableTables": ["orders", "victims", "sales.regions"]}
        other = await refused(client.call_tool("query", {"sql": "SELECT 1/0"}))
        assert (other.message, other.data) == ("division by zero", {"sqlstate": "22012"})


# -- the write mode --------------------------------------------------------------------------------


async def test_writes_need_allow_write_and_are_annotated_destructive(pg_url: str) -> None:
    read_only = open_backend(pg_url, Limits())
    async with Client(build_server(read_only)) as client:
        assert "execute" not in {tool.name for tool in await client.list_tools()}
    backend = open_backend(pg_url, Limits(), allow_write=True)
    async with Client(build_server(backend, allow_write=True)) as client:
        tools = {tool.name: tool for tool in await client.list_tools()}
        annotations = tools["execute"].annotations
        assert annotations.destructive_hint is True and annotations.read_only_hint is False
        assert tools["query"].annotations.read_only_hint is True
        result = await client.call_tool(
            "execute",
            {
                "sql": "INSERT INTO orders (victim_id, total) VALUES ($1, $2) RETURNING total",
                "params": [1, 777],
            },
        )
        assert result.content[0].text == "1 row(s) affected"
        assert json.loads(result.content[1].text) == [{"total": "777.00"}]
        count = await client.call_tool("query", {"sql": "SELECT count(*) AS n FROM orders"})
        assert json.loads(text(count)) == [{"n": 31}]
        # The read path is as read-only as without --allow-write.
        error = await refused(client.call_tool("query", {"sql": "DELETE FROM orders"}))
        assert error.data["reason"] == "not-read-only"
        for sql in ("COMMIT", "BEGIN", "SELECT 1; DELETE FROM orders", "COPY orders TO PROGRAM 'true'"):
            await refused(client.call_tool("execute", {"sql": sql}))
        await refused(client.call_tool("execute", {"sql": "SELECT lo_import('/etc/hostname')"}))
        deleted = await client.call_tool(
            "execute", {"sql": "DELETE FROM orders WHERE total = $1", "params": [777]}
        )
        assert deleted.content[0].text == "1 row(s) affected"
    assert pg_snapshot(pg_url)["orders"][0][0] == 30
