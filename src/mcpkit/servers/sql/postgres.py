"""PostgreSQL (psycopg 3): each statement in a READ ONLY transaction it cannot end.

How a read runs, and what each step stops:

1. The connection is opened with ``default_transaction_read_only = on`` and
   ``standard_conforming_strings = on`` (backslashes in literals are plain
   characters, as the guard's parser reads them). The read-only default is set
   for the session rather than with ``SET LOCAL``: it then covers any
   transaction the connection ever starts, not only the current one (which is
   READ ONLY already).
2. psycopg starts the transaction itself (``BEGIN READ ONLY``: the connection's
   ``read_only`` attribute), then ``SET LOCAL statement_timeout`` and
   ``lock_timeout`` (``pg_sleep(60)`` and a query stuck behind a lock are cut).
3. The statement goes over the extended query protocol, always: a query through
   a server-side cursor (``DECLARE ... CURSOR FOR``, which accepts only a query,
   and rows are fetched no further than the limits), ``EXPLAIN``/``SHOW`` as one
   bound statement. Either way the server parses exactly one statement: a
   ``COMMIT; DROP TABLE t`` cannot be stacked even if the guard were wrong.
4. The transaction is rolled back, always. A read that left the transaction
   (it cannot, but if the server ever said so) closes the connection.

What a READ ONLY transaction does not stop (``COPY ... TO PROGRAM`` and
``lo_export`` write server files, ``dblink`` opens a writable connection,
``pg_read_file`` reads files) is refused by the guard, and a dedicated role
without those privileges (docs/servers/sql.md) makes the database refuse them too.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

from .backends import (
    CATALOG_LIMITS,
    Backend,
    Column,
    DatabaseError,
    Limits,
    Rows,
    Table,
    UnknownTable,
    collect,
)
from .guard import Checked

if TYPE_CHECKING:
    import psycopg

__all__ = ["PostgresBackend", "redact"]

logger = logging.getLogger("mcpkit.servers.sql")

_CURSOR = "mcpkit_sql"
_SYSTEM_SCHEMAS = "n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\\_%'"


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError as exc:
        raise ImportError(
            "the sql server needs psycopg for PostgreSQL: pip install 'mcpkit[servers-sql]'", name="psycopg"
        ) from exc
    return psycopg


def redact(text: str, url: str) -> str:
    """``text`` with the URL's password (if any) replaced by ``***``: connection errors
    may quote the connection string, and nothing sensitive goes to logs or clients."""
    password = urlsplit(url).password
    return text.replace(password, "***") if password else text


class _Pool:
    """At most ``size`` connections, reused; a broken one is dropped."""

    def __init__(self, connect: Any, size: int, wait: float) -> None:
        self._connect = connect
        self._idle: list[psycopg.Connection[Any]] = []
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(size)
        self._wait = wait
        self._closed = False

    @contextlib.contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        if not self._slots.acquire(timeout=self._wait):
            raise DatabaseError(f"every database connection is busy (waited {self._wait:g} s); try again")
        conn = None
        try:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None or conn.closed:
                conn = self._connect()
            yield conn
        finally:
            if conn is not None:
                if conn.closed or conn.broken or self._closed:
                    conn.close()
                else:
                    with self._lock:
                        self._idle.append(conn)
            self._slots.release()

    def close(self) -> None:
        self._closed = True
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


class PostgresBackend(Backend):
    """A PostgreSQL database; reads on a pool of read-only connections, writes
    (``--allow-write``) on a connection of their own."""

    dialect = "postgres"
    label = "PostgreSQL"
    default_schema = "public"

    def __init__(self, url: str, limits: Limits, *, allow_write: bool = False, pool_size: int = 4) -> None:
        super().__init__(limits)
        self._psycopg = _psycopg()
        self.url = url
        self.allow_write = allow_write
        wait = limits.statement_timeout + 5
        self._reads = _Pool(lambda: self._open(read_only=True), pool_size, wait)
        self._writes = _Pool(lambda: self._open(read_only=False), 1, wait)
        # As the community server names them: postgres://user@host:port/<table>/schema
        # (the password dropped, and the database name too, as its URL resolution does).
        parts = urlsplit(url)
        user = f"{quote(parts.username, safe='')}@" if parts.username else ""
        host = parts.hostname or "localhost"
        host = f"[{host}]" if ":" in host else host
        port = f":{parts.port}" if parts.port else ""
        self.resource_base = f"postgres://{user}{host}{port}"
        with self._reads.connection() as conn:  # fail now, not at the first call
            self._warn_about_role(conn)

    # -- connections --------------------------------------------------------------

    def _open(self, *, read_only: bool) -> psycopg.Connection[Any]:
        pg = self._psycopg
        timeout_ms = int(self.limits.statement_timeout * 1000)
        try:
            conn: psycopg.Connection[Any] = pg.connect(
                self.url,
                autocommit=False,
                application_name="mcpkit-sql",
                connect_timeout=max(2, int(self.limits.statement_timeout)),
            )
        except pg.Error as exc:
            raise DatabaseError(redact(_message(exc), self.url)) from None
        try:
            with conn.cursor() as cur:
                cur.execute(f"SET default_transaction_read_only = {'on' if read_only else 'off'}")
                cur.execute("SET standard_conforming_strings = on")
                # A transaction left open by a stalled client is ended by the server.
                cur.execute(f"SET idle_in_transaction_session_timeout = {2 * timeout_ms + 5000}")
            conn.commit()
        except pg.Error as exc:
            conn.close()
            raise DatabaseError(_message(exc)) from None
        # psycopg opens each transaction itself: BEGIN READ ONLY (or READ WRITE).
        conn.read_only = read_only
        return conn

    def _warn_about_role(self, conn: psycopg.Connection[Any]) -> None:
        try:
            with conn.cursor() as cur:
                cur.execute(
                    "SELECT rolsuper, pg_has_role(current_user, 'pg_execute_server_program', 'MEMBER') "
                    "OR pg_has_role(current_user, 'pg_read_server_files', 'MEMBER') "
                    "OR pg_has_role(current_user, 'pg_write_server_files', 'MEMBER') "
                    "FROM pg_roles WHERE rolname = current_user"
                )
                row = cur.fetchone()
        finally:
            conn.rollback()
        if row and (row[0] or row[1]):
            logger.warning(
                "connected as a role that can reach the server's files or programs (%s): the statement "
                "guard is then the only thing between a query and them; use a dedicated read-only role "
                "(see the sql server's documentation)",
                "superuser" if row[0] else "pg_*_server_* member",
            )

    def _transaction(self, conn: psycopg.Connection[Any]) -> None:
        ms = int(self.limits.statement_timeout * 1000)
        with conn.cursor() as cur:  # our own text, no user input: the simple protocol is fine
            cur.execute(f"SET LOCAL statement_timeout = {ms}")
            cur.execute(f"SET LOCAL lock_timeout = {ms}")

    def _read(
        self,
        conn: psycopg.Connection[Any],
        sql: str,
        params: Sequence[Any],
        *,
        cursor: bool,
        limits: Limits | None = None,
    ) -> Rows:
        pg = self._psycopg
        limits = limits or self.limits
        try:
            self._transaction(conn)
            if cursor:
                with pg.RawServerCursor(conn, _CURSOR) as cur:
                    cur.execute(sql, _params(params))
                    columns = [d.name for d in cur.description or ()]
                    rows = collect(columns, _fetch(cur, limits.max_rows + 1), limits)
            else:
                with pg.RawCursor(conn) as cur:
                    # binary=True: the extended protocol even without parameters.
                    cur.execute(sql, _params(params), binary=True)
                    columns = [d.name for d in cur.description or ()]
                    rows = collect(columns, cur.fetchall() if cur.description else [], limits)
            self._still_in_transaction(conn)
            return rows
        except pg.Error as exc:
            raise self._error(exc) from None
        finally:
            with contextlib.suppress(pg.Error):
                conn.rollback()

    def _still_in_transaction(self, conn: psycopg.Connection[Any]) -> None:
        status = conn.info.transaction_status
        if status != self._psycopg.pq.TransactionStatus.INTRANS:
            conn.close()  # never reused: whatever happened to it stays with it
            raise DatabaseError(
                "the statement left the server's transaction: refused, and the connection dropped"
            )

    def _error(self, exc: Exception) -> DatabaseError:
        data: dict[str, Any] = {}
        diag = getattr(exc, "diag", None)
        sqlstate = getattr(exc, "sqlstate", None)
        if sqlstate:
            data["sqlstate"] = sqlstate
        for key, attr in (("detail", "message_detail"), ("hint", "message_hint")):
            value = getattr(diag, attr, None) if diag is not None else None
            if value:
                data[key] = value
        message = _message(exc)
        if sqlstate == "57014" and "statement timeout" in message:
            message += f" ({self.limits.statement_timeout:g} s, --statement-timeout)"
        return DatabaseError(redact(message, self.url), data, unknown_table=sqlstate == "42P01")

    # -- statements ---------------------------------------------------------------

    def query(self, checked: Checked, params: Sequence[Any]) -> Rows:
        with self._reads.connection() as conn:
            return self._read(conn, checked.sql, params, cursor=checked.kind == "query")

    def execute(self, checked: Checked, params: Sequence[Any]) -> Rows:
        pg = self._psycopg
        with self._writes.connection() as conn:
            try:
                self._transaction(conn)
                with pg.RawCursor(conn) as cur:
                    cur.execute(checked.sql, _params(params), binary=True)
                    columns = [d.name for d in cur.description or ()]
                    rows = collect(columns, cur.fetchall() if cur.description else [], self.limits)
                    rows.affected = cur.rowcount if cur.rowcount >= 0 else None
                self._still_in_transaction(conn)
                conn.commit()
                return rows
            except pg.Error as exc:
                with contextlib.suppress(pg.Error):
                    conn.rollback()
                raise self._error(exc) from None

    def explain(self, checked: Checked, params: Sequence[Any], analyze: bool) -> Any:
        options = "FORMAT JSON, ANALYZE" if analyze else "FORMAT JSON"
        with self._reads.connection() as conn:
            rows = self._read(conn, f"EXPLAIN ({options}) {checked.sql}", params, cursor=False)
        plan = rows.rows[0]["QUERY PLAN"] if rows.rows else None
        return plan[0] if isinstance(plan, list) and len(plan) == 1 else plan

    # -- the catalog --------------------------------------------------------------

    def _catalog(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        with self._reads.connection() as conn:
            return self._read(conn, sql, params, cursor=False, limits=CATALOG_LIMITS).rows

    def list_schemas(self) -> list[str]:
        rows = self._catalog(
            f"SELECT n.nspname AS name FROM pg_namespace n WHERE {_SYSTEM_SCHEMAS} "
            "AND has_schema_privilege(n.oid, 'USAGE') ORDER BY 1"
        )
        return [r["name"] for r in rows]

    def list_tables(self, schema: str | None = None) -> list[Table]:
        rows = self._catalog(
            "SELECT n.nspname AS schema, c.relname AS name, CASE c.relkind WHEN 'v' THEN 'view' "
            "WHEN 'm' THEN 'materialized view' WHEN 'f' THEN 'foreign table' ELSE 'table' END AS type "
            "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            f"WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f') AND {_SYSTEM_SCHEMAS} "
            "AND ($1::text IS NULL OR n.nspname = $1::text) "
            "AND has_schema_privilege(n.oid, 'USAGE') AND has_table_privilege(c.oid, 'SELECT') "
            "ORDER BY 1, 2",
            [schema],
        )
        return [Table(r["schema"], r["name"], r["type"]) for r in rows]

    def describe(self, table: str, schema: str | None = None) -> tuple[Table, list[Column]]:
        tables = self.list_tables()
        schema, name = self.split_name(table, schema)
        if schema is None:
            # A bare name: the first schema on the search path that has it.
            visible = self._catalog(
                "SELECT n.nspname AS schema FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE c.relname = $1::text AND pg_table_is_visible(c.oid)",
                [name],
            )
            schema = visible[0]["schema"] if visible else self.default_schema
        found = [t for t in tables if t.schema == schema and t.name == name]
        if not found:
            raise UnknownTable(table)
        rows = self._catalog(
            "SELECT a.attname AS name, format_type(a.atttypid, a.atttypmod) AS type, "
            "NOT a.attnotnull AS nullable, pg_get_expr(d.adbin, d.adrelid) AS default, "
            "COALESCE(a.attnum = ANY(i.indkey), false) AS primary_key "
            "FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum "
            "LEFT JOIN pg_index i ON i.indrelid = c.oid AND i.indisprimary "
            "WHERE n.nspname = $1::text AND c.relname = $2::text AND a.attnum > 0 AND NOT a.attisdropped "
            "ORDER BY a.attnum",
            [schema, name],
        )
        return found[0], [Column(**r) for r in rows]

    def close(self) -> None:
        self._reads.close()
        self._writes.close()


def _message(exc: BaseException) -> str:
    diag = getattr(exc, "diag", None)
    primary = getattr(diag, "message_primary", None) if diag is not None else None
    if primary:
        return str(primary)
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _params(params: Sequence[Any]) -> list[Any]:
    from psycopg.types.json import Jsonb

    # JSON objects go in as jsonb; lists become arrays (psycopg's own adaptation).
    return [Jsonb(p) if isinstance(p, dict) else p for p in params]


def _fetch(cursor: Any, most: int) -> Iterator[Sequence[Any]]:
    """Rows from a server-side cursor, in batches, never past ``most``."""
    fetched = 0
    while fetched < most:
        batch = cursor.fetchmany(min(100, most - fetched))
        if not batch:
            return
        fetched += len(batch)
        yield from batch
