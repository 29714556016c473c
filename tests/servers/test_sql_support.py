"""Shared by the sql server's tests: a PostgreSQL database of their own, a SQLite file,
snapshots of everything an attack could change, and helpers to run the server.

No tests here. PostgreSQL is the machine's, on 127.0.0.1:5432 (trust authentication,
database ``test``, user ``postgres``); each test module creates a database of its own
and drops it afterwards. When PostgreSQL cannot be reached the tests fail, saying so:
they are never skipped.
"""

from __future__ import annotations

import hashlib
import os
import re
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from _wait import wait_until
from mcpkit import MCPError
from mcpkit.protocol import types as t

ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/test"
SERVER = [sys.executable, "-m", "mcpkit.servers.sql"]

SEED_SQL = """
CREATE TABLE victims (id int PRIMARY KEY, name text NOT NULL);
INSERT INTO victims VALUES (1, 'alice'), (2, 'bob'), (3, 'carol');
CREATE TABLE orders (
    id serial PRIMARY KEY,
    victim_id int REFERENCES victims (id),
    total numeric(10, 2) NOT NULL DEFAULT 0,
    placed timestamptz NOT NULL DEFAULT '2025-01-01 00:00:00+00'
);
INSERT INTO orders (victim_id, total) SELECT 1 + g % 3, g FROM generate_series(1, 30) g;
CREATE SCHEMA sales;
CREATE TABLE sales.regions (code text PRIMARY KEY, name text);
INSERT INTO sales.regions VALUES ('eu', 'Europe');
CREATE SEQUENCE counter;
CREATE EXTENSION dblink;
"""


def admin() -> psycopg.Connection[Any]:
    """A connection to the ``test`` database, or a test failure that says what is missing."""
    try:
        return psycopg.connect(ADMIN_URL, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        pytest.fail(
            f"PostgreSQL is not reachable at {ADMIN_URL} ({exc}). The sql server's tests need it: "
            "install and start it (make test does, from Debian's packages) with trust authentication "
            "for 127.0.0.1 and a database named test.",
            pytrace=False,
        )


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    """A database of this module's own, seeded with SEED_SQL; dropped afterwards."""
    name = f"mcpkit_sql_{uuid.uuid4().hex[:12]}"
    with admin() as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = f"postgresql://postgres@127.0.0.1:5432/{name}"
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(SEED_SQL)
        yield url
    finally:
        with admin() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def pg_snapshot(url: str) -> dict[str, Any]:
    """Everything the attack battery could change in the database, read as its owner."""
    with psycopg.connect(url, autocommit=True) as conn:

        def rows(sql: str) -> list[tuple[Any, ...]]:
            return conn.execute(sql).fetchall()

        return {
            "victims": rows("SELECT * FROM victims ORDER BY id"),
            "orders": rows("SELECT count(*), sum(total) FROM orders"),
            "relations": rows(
                "SELECT n.nspname, c.relname, c.relkind FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') "
                "AND n.nspname NOT LIKE 'pg_toast%' ORDER BY 1, 2"
            ),
            "functions": rows(
                "SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
                "WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') ORDER BY 1"
            ),
            "large_objects": rows("SELECT count(*) FROM pg_largeobject_metadata"),
            "counter": rows("SELECT last_value, is_called FROM counter"),
            "grants": rows(
                "SELECT grantee, privilege_type FROM information_schema.role_table_grants "
                "WHERE table_name = 'victims' ORDER BY 1, 2"
            ),
            "roles": rows("SELECT rolname FROM pg_roles ORDER BY 1"),
            "comment": rows("SELECT obj_description('victims'::regclass)"),
            "advisory_locks": rows(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
                "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
            ),
        }


def sqlite_file(directory: Path) -> Path:
    """A SQLite database in ``directory`` with the same victims and a few orders."""
    path = directory / "shop.db"
    with sqlite3.connect(path) as conn:
        conn.executescript(
            """
            CREATE TABLE victims (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
            INSERT INTO victims VALUES (1, 'alice'), (2, 'bob'), (3, 'carol');
            CREATE TABLE orders (id INTEGER PRIMARY KEY, victim_id INTEGER REFERENCES victims (id),
                                 total REAL NOT NULL DEFAULT 0);
            INSERT INTO orders (victim_id, total) VALUES (1, 10.5), (2, 20), (3, 30);
            CREATE VIEW big_orders AS SELECT * FROM orders WHERE total > 15;
            """
        )
    conn.close()
    return path


def files_snapshot(directory: Path) -> dict[str, str]:
    """Every file under ``directory`` and a hash of its bytes."""
    return {
        str(path.relative_to(directory)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(directory.rglob("*"))
        if path.is_file()
    }


def text(result: t.CallToolResult) -> str:
    assert result.is_error is not True, result
    block = result.content[0]
    assert isinstance(block, t.TextContent)
    return block.text


async def refused(call: Any) -> MCPError:
    """The -32602 error a call is answered with."""
    with pytest.raises(MCPError) as info:
        await call
    assert info.value.code == -32602, info.value
    return info.value


class HTTPServer:
    """``python -m mcpkit.servers.sql URL --transport http --port 0`` as a real process; the
    port is read from the line it prints on stderr once it listens."""

    def __init__(self, args: list[str], log: Path, env: dict[str, str] | None = None) -> None:
        self.log = log
        self.stderr = log.open("wb")
        self.proc = subprocess.Popen(
            [*SERVER, *args, "--transport", "http", "--port", "0"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self.stderr,
            env=env,
        )
        match = wait_until(self._serving, timeout=20)
        self.url = match.group(1)

    def _serving(self) -> re.Match[str] | None:
        if self.proc.poll() is not None:
            raise AssertionError(f"the server exited ({self.proc.returncode}): {self.log.read_text()}")
        return re.search(r"at (http://127\.0\.0\.1:\d+/mcp)", self.log.read_text())

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.stderr.close()


def subprocess_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("DATABASE_URL", None)
    return env
