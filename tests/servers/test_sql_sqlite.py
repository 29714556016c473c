"""The sql server on SQLite: the attack battery (ATTACH, load_extension, PRAGMA
writable_schema, VACUUM INTO, stacked and plain writes, lexing tricks), each layer under
the guard shown to hold on its own, limits, timeouts, errors and the write mode.

Every attack asserts that nothing was written: the database file's bytes are unchanged
and no file was created next to it.
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest
from test_sql_support import SERVER, files_snapshot, refused, sqlite_file, subprocess_env, text

from mcpkit import Client
from mcpkit.servers.sql import Checked, Limits, build_server, open_backend
from mcpkit.servers.sql import sqlite as sqlite_backend
from mcpkit.servers.sql.backends import DatabaseError
from mcpkit.servers.sql.sqlite import SQLiteBackend, sqlite_path


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return sqlite_file(tmp_path)


@pytest.fixture
def backend(db: Path) -> SQLiteBackend:
    backend = open_backend(f"sqlite://{db}", Limits(statement_timeout=2.0, max_rows=50))
    assert isinstance(backend, SQLiteBackend)
    return backend


ATTACKS = {
    "attach": "ATTACH DATABASE 'DIR/evil.db' AS evil",
    "attach-uri-rwc": "ATTACH 'file:DIR/evil.db?mode=rwc' AS evil",
    "detach": "DETACH DATABASE main",
    "load-extension": "SELECT load_extension('DIR/evil')",
    "load-extension-in-where": "SELECT * FROM victims WHERE load_extension('DIR/evil') IS NULL",
    "writable-schema": "PRAGMA writable_schema = 1",
    "writable-schema-on": "PRAGMA writable_schema=ON",
    "writable-schema-then-update": (
        "PRAGMA writable_schema = 1; UPDATE sqlite_master SET sql = 'CREATE TABLE victims (x)' "
        "WHERE name = 'victims'"
    ),
    "pragma-user-version": "PRAGMA user_version = 42",
    "pragma-journal-mode": "PRAGMA journal_mode = WAL",
    "pragma-function-form": "PRAGMA main.user_version(42)",
    "vacuum-into": "VACUUM INTO 'DIR/copy.db'",
    "vacuum": "VACUUM",
    "commit-then-drop": "COMMIT; DROP TABLE victims",
    "select-then-delete": "SELECT 1; DELETE FROM victims",
    "stack-after-string": "SELECT ';' AS x; DELETE FROM victims",
    "stack-after-comment": "SELECT 1 /* ; */; DELETE FROM victims",
    "stack-after-line-comment": "SELECT 1 -- ;\n; DELETE FROM victims",
    "delete": "DELETE FROM victims",
    "insert": "INSERT INTO victims VALUES (9, 'mallory')",
    "replace": "REPLACE INTO victims VALUES (1, 'mallory')",
    "update": "UPDATE victims SET name = 'x'",
    "drop": "DROP TABLE victims",
    "create-table": "CREATE TABLE pwned (x)",
    "create-temp-table": "CREATE TEMP TABLE pwned (x)",
    "create-trigger": "CREATE TRIGGER t AFTER INSERT ON victims BEGIN DELETE FROM victims; END",
    "writable-cte": "WITH d AS (DELETE FROM victims RETURNING *) SELECT * FROM d",
    "select-into": "SELECT * INTO stolen FROM victims",
    "begin": "BEGIN IMMEDIATE",
    "savepoint": "SAVEPOINT s",
    "reindex": "REINDEX",
    "analyze": "ANALYZE",
    "writefile": "SELECT writefile('DIR/out.txt', 'data')",
    "readfile": "SELECT readfile('/etc/hostname')",
    "unparseable": "SELECT FROM WHERE (",
}


@pytest.mark.parametrize("sql", ATTACKS.values(), ids=ATTACKS.keys())
async def test_attack_is_refused_and_nothing_is_written(backend: SQLiteBackend, db: Path, sql: str) -> None:
    before = files_snapshot(db.parent)
    statement = sql.replace("DIR", str(db.parent))
    async with Client(build_server(backend)) as client:
        error = await refused(client.call_tool("query", {"sql": statement}))
        assert error.message.startswith("Refused: "), error.message
        # mcp-server-sqlite's name for the same tool holds the same line.
        error = await refused(client.call_tool("read_query", {"query": statement}))
        assert error.message.startswith("Refused: "), error.message
        rows = await client.call_tool("query", {"sql": "SELECT name FROM victims ORDER BY id"})
        assert json.loads(text(rows)) == [{"name": "alice"}, {"name": "bob"}, {"name": "carol"}]
    assert files_snapshot(db.parent) == before


async def test_the_battery_through_a_real_stdio_process(db: Path) -> None:
    before = files_snapshot(db.parent)
    async with Client([*SERVER, f"sqlite://{db}"], env=subprocess_env()) as client:
        for name, sql in ATTACKS.items():
            error = await refused(client.call_tool("query", {"sql": sql.replace("DIR", str(db.parent))}))
            assert error.message.startswith("Refused: "), (name, error.message)
    assert files_snapshot(db.parent) == before


# -- the layers under the guard -------------------------------------------------------------

BYPASSES = {
    "attach": "ATTACH DATABASE 'DIR/evil.db' AS evil",
    "vacuum-into": "VACUUM INTO 'DIR/copy.db'",
    "load-extension": "SELECT load_extension('DIR/evil')",
    "writable-schema": "PRAGMA writable_schema = 1",
    "delete": "DELETE FROM victims",
    "create-temp-table": "CREATE TEMP TABLE pwned (x)",
    "begin": "BEGIN IMMEDIATE",
    "stacked": "SELECT 1; DELETE FROM victims",
}


@pytest.mark.parametrize("sql", BYPASSES.values(), ids=BYPASSES.keys())
def test_with_the_guard_bypassed_sqlite_still_refuses(backend: SQLiteBackend, db: Path, sql: str) -> None:
    before = files_snapshot(db.parent)
    with pytest.raises(DatabaseError):
        backend.query(Checked(sql.replace("DIR", str(db.parent)), "query"), [])
    assert files_snapshot(db.parent) == before


@pytest.mark.parametrize(
    "sql", ["ATTACH DATABASE 'DIR/evil.db' AS evil", "VACUUM INTO 'DIR/copy.db'", "DELETE FROM victims"]
)
def test_with_the_guard_and_the_authorizer_bypassed_the_file_is_still_safe(
    backend: SQLiteBackend, db: Path, sql: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ATTACH and VACUUM INTO create files even on a read-only connection: the zero limit
    on attached databases stops them; mode=ro stops writes."""
    monkeypatch.setattr(sqlite_backend, "_read_only_authorizer", lambda *args: sqlite3.SQLITE_OK)
    before = files_snapshot(db.parent)
    with pytest.raises(DatabaseError, match=r"too many attached databases|readonly database"):
        backend.query(Checked(sql.replace("DIR", str(db.parent)), "query"), [])
    assert files_snapshot(db.parent) == before


def test_without_any_layer_attach_would_have_created_a_file(db: Path) -> None:
    """What the layers are for: a plain read-only connection creates the attached file."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        conn.execute(f"ATTACH DATABASE '{db.parent}/evil.db' AS evil")
    finally:
        conn.close()
    assert (db.parent / "evil.db").exists()


async def test_a_runaway_query_is_cut_by_the_statement_timeout(db: Path) -> None:
    backend = open_backend(f"sqlite://{db}", Limits(statement_timeout=0.5))
    endless = "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT count(*) FROM r"
    async with Client(build_server(backend)) as client:
        started = time.monotonic()
        error = await refused(client.call_tool("query", {"sql": endless}))
        assert time.monotonic() - started < 5
        assert "ran longer than 0.5 s (--statement-timeout)" in error.message
        huge = await refused(client.call_tool("query", {"sql": "SELECT length(randomblob(1000000000)) AS n"}))
        assert "too big" in huge.message
        assert json.loads(text(await client.call_tool("query", {"sql": "SELECT 1 AS one"}))) == [{"one": 1}]


# -- results, limits, errors ------------------------------------------------------------------


async def test_rows_are_cut_at_the_row_and_byte_limits(db: Path) -> None:
    endless = "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT n FROM r"
    async with Client(build_server(open_backend(f"sqlite://{db}", Limits(max_rows=3)))) as client:
        result = await client.call_tool("query", {"sql": endless})  # stops at the limit: no timeout
        assert json.loads(text(result)) == [{"n": 1}, {"n": 2}, {"n": 3}]
        assert "more than 3 rows (--max-rows)" in result.content[1].text
    async with Client(build_server(open_backend(f"sqlite://{db}", Limits(max_bytes=200)))) as client:
        result = await client.call_tool("query", {"sql": endless})
        assert len(result.content[0].text.encode()) <= 200
        assert "(--max-bytes)" in result.content[1].text


async def test_reads_tools_and_errors(backend: SQLiteBackend) -> None:
    async with Client(build_server(backend)) as client:
        found = await client.call_tool(
            "query", {"sql": "SELECT name FROM victims WHERE id = ?", "params": [2]}
        )
        assert json.loads(text(found)) == [{"name": "bob"}]
        pragma = await client.call_tool("query", {"sql": "PRAGMA table_info(victims)"})
        assert [row["name"] for row in json.loads(text(pragma))] == ["id", "name"]
        plan = await client.call_tool(
            "query", {"sql": "EXPLAIN QUERY PLAN SELECT * FROM victims WHERE id = 1"}
        )
        assert "SEARCH victims" in text(plan)
        assert json.loads(text(await client.call_tool("list_schemas", {}))) == ["main"]
        tables = json.loads(text(await client.call_tool("list_tables", {})))
        assert tables == [
            {"schema": "main", "name": "big_orders", "type": "view"},
            {"schema": "main", "name": "orders", "type": "table"},
            {"schema": "main", "name": "victims", "type": "table"},
        ]
        described = json.loads(text(await client.call_tool("describe_table", {"table_name": "victims"})))
        assert described["columns"] == [
            {"name": "id", "type": "INTEGER", "nullable": False, "default": None, "primary_key": True},
            {"name": "name", "type": "TEXT", "nullable": False, "default": None, "primary_key": False},
        ]
        error = await refused(client.call_tool("query", {"sql": "SELECT * FROM nonexistent"}))
        assert error.message == "no such table: nonexistent"
        assert error.data["availableTables"] == ["big_orders", "orders", "victims"]
        error = await refused(client.call_tool("describe_table", {"table_name": "nonexistent"}))
        assert error.data == {"availableTables": ["big_orders", "orders", "victims"]}


async def test_writes_need_allow_write(db: Path) -> None:
    backend = open_backend(f"sqlite://{db}", Limits(), allow_write=True)
    async with Client(build_server(backend, allow_write=True)) as client:
        tool = {t.name: t for t in await client.list_tools()}["execute"]
        assert tool.annotations.destructive_hint is True
        result = await client.call_tool(
            "execute", {"sql": "INSERT INTO victims (name) VALUES (?) RETURNING id", "params": ["dave"]}
        )
        assert result.content[0].text == "1 row(s) affected"
        assert json.loads(result.content[1].text) == [{"id": 4}]
        for sql in (
            "ATTACH 'DIR/evil.db' AS evil",
            "BEGIN",
            "COMMIT",
            "PRAGMA writable_schema = 1",
            "VACUUM",
        ):
            await refused(client.call_tool("execute", {"sql": sql.replace("DIR", str(db.parent))}))
        await refused(client.call_tool("execute", {"sql": "SELECT load_extension('x')"}))
        # The read path stays read-only.
        await refused(client.call_tool("query", {"sql": "DELETE FROM victims"}))
        await refused(client.call_tool("read_query", {"query": "DELETE FROM victims"}))
    assert not (db.parent / "evil.db").exists()
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT name FROM victims ORDER BY id").fetchall()[-1] == ("dave",)
    conn.close()


async def test_mcp_server_sqlite_write_tools_are_the_write_tool_under_their_names(db: Path) -> None:
    with sqlite3.connect(db) as conn:
        before = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    conn.close()
    backend = open_backend(f"sqlite://{db}", Limits(), allow_write=True)
    async with Client(build_server(backend, allow_write=True)) as client:
        tools = {t.name: t for t in await client.list_tools()}
        for name in ("write_query", "create_table"):
            assert tools[name].annotations.destructive_hint is True, name
            assert tools[name].annotations.read_only_hint is False, name
            assert tools[name].input_schema["required"] == ["query"], name
        result = await client.call_tool(
            "write_query", {"query": "UPDATE victims SET name = 'eve' WHERE id = 1"}
        )
        assert result.content[0].text == "1 row(s) affected"
        created = await client.call_tool(
            "create_table", {"query": "CREATE TABLE notes (id INTEGER, body TEXT)"}
        )
        assert created.content[0].text == "Table created successfully"
        # create_table creates a table and nothing else; both keep the write tool's refusals.
        for sql, reason in [
            ("DROP TABLE victims", "not-create-table"),
            ("CREATE INDEX i ON victims (name)", "not-create-table"),
            ("CREATE TABLE x (a); DROP TABLE victims", "multiple-statements"),
            ("ATTACH 'DIR/evil.db' AS evil", "not-allowed"),
        ]:
            error = await refused(
                client.call_tool("create_table", {"query": sql.replace("DIR", str(db.parent))})
            )
            assert error.data == {"reason": reason}, (sql, error.data)
        for sql in ("ATTACH 'DIR/evil.db' AS evil", "COMMIT", "PRAGMA writable_schema = 1"):
            await refused(client.call_tool("write_query", {"query": sql.replace("DIR", str(db.parent))}))
        read = await client.call_tool(
            "read_query", {"query": "SELECT name FROM victims WHERE id = ?", "params": [1]}
        )
        assert json.loads(text(read)) == [{"name": "eve"}]
    assert not (db.parent / "evil.db").exists()
    with sqlite3.connect(db) as conn:
        after = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    conn.close()
    assert after == before | {"notes"}  # that one table, and no other change to the schema


def test_the_write_authorizer_refuses_attach_and_pragmas_even_without_the_guard(db: Path) -> None:
    backend = open_backend(f"sqlite://{db}", Limits(), allow_write=True)
    before = files_snapshot(db.parent)
    for sql in ("ATTACH 'DIR/evil.db' AS evil", "PRAGMA writable_schema = 1", "COMMIT"):
        with pytest.raises(DatabaseError):
            backend.execute(Checked(sql.replace("DIR", str(db.parent)), "write"), [])
    assert files_snapshot(db.parent) == before


@pytest.mark.parametrize(
    "url, path",
    [
        ("sqlite:///tmp/x.db", "/tmp/x.db"),
        ("sqlite:data/x.db", "data/x.db"),
        ("sqlite://localhost/tmp/x.db", "/tmp/x.db"),
        ("sqlite:////tmp/x.db", "/tmp/x.db"),  # SQLAlchemy's spelling of an absolute path
        ("sqlite://///tmp/x.db", "/tmp/x.db"),
    ],
)
def test_sqlite_urls(url: str, path: str) -> None:
    assert sqlite_path(url) == path


@pytest.mark.parametrize(
    "url", ["sqlite:///x.db?mode=rwc", "sqlite://host/x.db", "sqlite://", "sqlite::memory:"]
)
def test_sqlite_urls_the_server_refuses(url: str) -> None:
    with pytest.raises(ValueError):
        sqlite_path(url)
