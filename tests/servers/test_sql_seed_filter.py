"""The seed documents' ``validateSqlQuery`` against mcpkit's sql server.

The seed (000_..., the input-validation section) guards a ``query(sql)`` tool with a
keyword filter: the text must start with SELECT and contain none of DROP, DELETE,
UPDATE, INSERT, ALTER. Each statement below passes that filter, and each is one the
sql server refuses, with nothing changed. The filter also refuses harmless queries
the server runs. A first test shows that what passes the filter does real damage
behind it, even inside a READ ONLY transaction (the archived community server's setup).
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import psycopg
import pytest
from test_sql_support import pg_snapshot, pg_url, refused, text

from mcpkit import Client, MCPError
from mcpkit.servers.sql import Limits, build_server, open_backend

__all__ = ["pg_url"]  # the fixture, imported for pytest


def validate_sql_query(sql: str) -> None:
    """The seed's validateSqlQuery, as it describes it (its TypeScript, line for line)."""
    normalized = sql.strip().upper()
    if not normalized.startswith("SELECT"):
        raise MCPError(-32602, "Only SELECT queries are allowed")
    for keyword in ("DROP", "DELETE", "UPDATE", "INSERT", "ALTER"):
        if keyword in normalized:
            raise MCPError(-32602, f"Forbidden SQL keyword: {keyword}")


def naive_query(url: str, sql: str) -> None:
    """A server guarded by the seed's filter that runs the query as the archived community
    server did: BEGIN TRANSACTION READ ONLY, the text as sent (simple protocol), COMMIT."""
    validate_sql_query(sql)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("BEGIN TRANSACTION READ ONLY")
        conn.execute(sql)  # type: ignore[call-overload]
        conn.execute("COMMIT")


BYPASSES = {
    "select-into": "SELECT * INTO stolen FROM victims",
    "select-then-truncate": "SELECT 1; TRUNCATE victims",
    "select-then-commit-then-truncate": "SELECT 1; COMMIT; TRUNCATE victims",
    "select-then-create": "SELECT 1; CREATE TABLE pwned (x int)",
    "select-then-grant": "SELECT 1; GRANT ALL ON victims TO PUBLIC",
    "select-then-comment": "SELECT 1; COMMENT ON TABLE victims IS 'pwned'",
    "select-then-copy-to-program": "SELECT 1; COPY victims TO PROGRAM 'touch MARKER'",
    "select-then-do-with-split-keyword": "SELECT 1; DO $$BEGIN EXECUTE 'DEL' || 'ETE FROM victims'; END$$",
    "dblink-with-split-keyword": (
        "SELECT dblink_exec('dbname=' || current_database(), 'DEL' || 'ETE FROM victims')"
    ),
    "lo-import": "SELECT lo_import('/etc/hostname')",
    "pg-read-file": "SELECT pg_read_file('/etc/hostname')",
    "set-config": "SELECT set_config('default_transaction_read_only', 'off', false)",
    "for-share-lock": "SELECT * FROM victims FOR SHARE",
    "advisory-lock": "SELECT pg_advisory_lock(42)",
    "nextval": "SELECT nextval('counter')",
    "query-to-xml-with-split-keyword": (
        "SELECT query_to_xml('DEL' || 'ETE FROM victims RETURNING 1', true, false, '')"
    ),
}


def test_what_passes_the_filter_does_damage_behind_it(pg_url: str) -> None:
    table = f"scratch_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {table} AS SELECT g AS n FROM generate_series(1, 5) g")  # type: ignore[call-overload]
    try:
        naive_query(pg_url, f"SELECT 1; COMMIT; TRUNCATE {table}")
        with psycopg.connect(pg_url) as conn:
            assert conn.execute(f"SELECT count(*) FROM {table}").fetchone() == (0,)  # type: ignore[call-overload]
    finally:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f"DROP TABLE {table}")  # type: ignore[call-overload]


@pytest.mark.parametrize("sql", BYPASSES.values(), ids=BYPASSES.keys())
async def test_the_filter_lets_it_through_and_the_server_refuses_it(pg_url: str, sql: str) -> None:
    marker = Path(f"/tmp/mcpkit_sql_{uuid.uuid4().hex}")
    statement = sql.replace("MARKER", str(marker))
    validate_sql_query(statement)  # passes the seed's filter
    before = pg_snapshot(pg_url)
    async with Client(build_server(open_backend(pg_url, Limits()))) as client:
        error = await refused(client.call_tool("query", {"sql": statement}))
        assert error.message.startswith("Refused: ")
    assert pg_snapshot(pg_url) == before
    assert not marker.exists()


HARMLESS = {
    "column-named-last-updated": (
        "SELECT id AS last_updated FROM victims WHERE id = 1",
        [{"last_updated": 1}],
    ),
    "a-literal-word": ("SELECT 'DROP' AS word", [{"word": "DROP"}]),
    "a-value-containing-delete": ("SELECT count(*) AS n FROM victims WHERE name <> 'deleted'", [{"n": 3}]),
    "with-query": ("WITH t AS (SELECT 2 AS n) SELECT n FROM t", [{"n": 2}]),
    "values": ("VALUES (1)", [{"column1": 1}]),
}


@pytest.mark.parametrize("sql, rows", HARMLESS.values(), ids=HARMLESS.keys())
async def test_the_filter_refuses_harmless_queries_the_server_runs(
    pg_url: str, sql: str, rows: list[object]
) -> None:
    with pytest.raises(MCPError):
        validate_sql_query(sql)
    async with Client(build_server(open_backend(pg_url, Limits()))) as client:
        assert json.loads(text(await client.call_tool("query", {"sql": sql}))) == rows
