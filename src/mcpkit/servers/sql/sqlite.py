"""SQLite (the standard library's sqlite3): a read-only file, an authorizer, limits.

Every read opens the file with ``mode=ro`` (SQLite itself refuses to write it),
caps attached databases at zero (``ATTACH`` and ``VACUUM INTO``, which attaches
internally, cannot create a file even without the authorizer), and installs an
authorizer (``sqlite3_set_authorizer``) that allows only reading: ``SELECT``,
reads of columns, recursive CTEs, functions other than ``load_extension`` and
the file functions, and the read-only pragmas. Each of these layers stops the
battery on its own (see tests/servers/test_sql_sqlite.py); together with the
statement guard there are four.

The write tool (``--allow-write``) opens the file ``mode=rw`` (never creating
it) with an authorizer that allows data and schema changes but still refuses
``ATTACH``/``DETACH``, pragmas that change settings (``writable_schema``...),
transactions the statement would open or end, and ``load_extension``.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any
from urllib.parse import quote

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
from .guard import READ_ONLY_PRAGMAS, Checked

__all__ = ["SQLiteBackend", "sqlite_path"]

# sqlite3 names only some action codes (SQLITE_RECURSIVE is missing before 3.12).
_PRAGMA = 19
_READ = 20
_SELECT = 21
_TRANSACTION = 22
_FUNCTION = 31
_RECURSIVE = 33
_ATTACH = 24
_DETACH = 25
_SAVEPOINT = 32

_DENIED_FUNCTIONS = frozenset({"load_extension", "readfile", "writefile", "edit", "fts3_tokenizer"})


def sqlite_path(url: str) -> str:
    """The file a ``sqlite:`` URL names: ``sqlite:///abs/path.db`` (absolute, as in a
    ``file:`` URL), ``sqlite:relative/path.db``; no host, no query string (the server
    decides how the file is opened)."""
    rest = url[len("sqlite:") :]
    if "?" in rest or "#" in rest:
        raise ValueError("a sqlite: URL takes no query string (the server opens the file read-only itself)")
    if rest.startswith("//"):
        host, slash, path = rest[2:].partition("/")
        if host not in ("", "localhost"):
            raise ValueError(f"a sqlite: URL names a local file, not a host ({host!r})")
        rest = slash + path
    if rest.startswith("//"):
        # sqlite:////abs/path.db, SQLAlchemy's spelling of an absolute path: one file for
        # both conventions. Kept as "//abs", it would become file://abs, a URI whose
        # authority SQLite refuses.
        rest = "/" + rest.lstrip("/")
    if rest in ("", "/") or rest == ":memory:":
        raise ValueError("a sqlite: URL needs a database file: sqlite:///path/to.db")
    return rest


def _read_only_authorizer(
    action: int, arg1: str | None, arg2: str | None, db: str | None, source: str | None
) -> int:
    if action in (_SELECT, _READ, _RECURSIVE):
        return sqlite3.SQLITE_OK
    if action == _FUNCTION:
        return sqlite3.SQLITE_DENY if (arg2 or "").lower() in _DENIED_FUNCTIONS else sqlite3.SQLITE_OK
    if action == _PRAGMA and (arg1 or "").lower() in READ_ONLY_PRAGMAS:
        return sqlite3.SQLITE_OK
    return sqlite3.SQLITE_DENY


class _WriteAuthorizer:
    """Allows changing data and schema; our own BEGIN/COMMIT only while ``ours`` is set."""

    def __init__(self) -> None:
        self.ours = False

    def __call__(
        self, action: int, arg1: str | None, arg2: str | None, db: str | None, source: str | None
    ) -> int:
        if action in (_ATTACH, _DETACH):
            return sqlite3.SQLITE_DENY
        if action in (_TRANSACTION, _SAVEPOINT):
            return sqlite3.SQLITE_OK if self.ours else sqlite3.SQLITE_DENY
        if action == _FUNCTION:
            return sqlite3.SQLITE_DENY if (arg2 or "").lower() in _DENIED_FUNCTIONS else sqlite3.SQLITE_OK
        if action == _PRAGMA:
            return sqlite3.SQLITE_OK if (arg1 or "").lower() in READ_ONLY_PRAGMAS else sqlite3.SQLITE_DENY
        return sqlite3.SQLITE_OK


class SQLiteBackend(Backend):
    """A SQLite file; a new connection per call (opening one costs microseconds, and
    nothing is shared between calls)."""

    dialect = "sqlite"
    label = "SQLite"
    default_schema = "main"

    def __init__(self, path: str, limits: Limits, *, allow_write: bool = False) -> None:
        super().__init__(limits)
        self.path = os.path.abspath(path)
        if not os.path.isfile(self.path):
            raise FileNotFoundError(f"no SQLite database at {self.path}")
        self.allow_write = allow_write
        self.resource_base = f"sqlite://{quote(self.path)}"
        self._write_lock = threading.Lock()
        with self._connect(write=False) as conn:  # fail now on a file that is not a database
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()

    # -- connections --------------------------------------------------------------

    @contextlib.contextmanager
    def _connect(
        self, *, write: bool, authorizer: Callable[..., int] | None = None
    ) -> Iterator[sqlite3.Connection]:
        mode = "rw" if write else "ro"
        uri = f"file:{quote(self.path)}?mode={mode}"
        try:
            conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False, timeout=5)
        except sqlite3.Error as exc:
            raise DatabaseError(str(exc)) from None
        try:
            # Zero attached databases: ATTACH, and VACUUM INTO (which attaches its target),
            # cannot open or create another file whatever the authorizer says.
            conn.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
            # A value longer than this is an error, not a memory spike (randomblob(1e9)).
            conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, max(4 * self.limits.max_bytes, 1 << 20))
            conn.set_authorizer(authorizer or _read_only_authorizer)
            deadline = time.monotonic() + self.limits.statement_timeout
            # SQLite has no statement timeout: the progress handler interrupts a statement
            # that runs past it (checked every 10k virtual machine instructions).
            conn.set_progress_handler(lambda: 1 if time.monotonic() > deadline else 0, 10_000)
            yield conn
        finally:
            conn.close()

    def _run(
        self, conn: sqlite3.Connection, sql: str, params: Sequence[Any], limits: Limits | None = None
    ) -> Rows:
        try:
            cursor = conn.execute(sql, _params(params))
            columns = [d[0] for d in cursor.description or ()]
            rows = collect(columns, _fetch(cursor), limits or self.limits)
            rows.affected = cursor.rowcount if cursor.rowcount >= 0 else None
            cursor.close()
            return rows
        except sqlite3.Error as exc:
            raise self._error(exc) from None
        except (sqlite3.Warning, OverflowError) as exc:  # "one statement at a time", int too big
            raise DatabaseError(str(exc)) from None

    def _error(self, exc: sqlite3.Error) -> DatabaseError:
        message = str(exc)
        if message == "interrupted":
            message = (
                f"the statement ran longer than {self.limits.statement_timeout:g} s (--statement-timeout)"
            )
        data: dict[str, Any] = {}
        code = getattr(exc, "sqlite_errorname", None)
        if code:
            data["code"] = code
        return DatabaseError(message, data, unknown_table=message.startswith("no such table"))

    # -- statements ---------------------------------------------------------------

    def query(self, checked: Checked, params: Sequence[Any]) -> Rows:
        with self._connect(write=False) as conn:
            return self._run(conn, checked.sql, params)

    def execute(self, checked: Checked, params: Sequence[Any]) -> Rows:
        authorizer = _WriteAuthorizer()
        with self._write_lock, self._connect(write=True, authorizer=authorizer) as conn:
            authorizer.ours = True
            conn.execute("BEGIN IMMEDIATE")
            authorizer.ours = False
            try:
                rows = self._run(conn, checked.sql, params)
            except BaseException:
                authorizer.ours = True
                conn.execute("ROLLBACK")
                raise
            authorizer.ours = True
            conn.execute("COMMIT")
            return rows

    def explain(self, checked: Checked, params: Sequence[Any], analyze: bool) -> Any:
        if analyze:
            raise DatabaseError("analyze runs the query and times it: PostgreSQL only")
        with self._connect(write=False) as conn:
            rows = self._run(conn, f"EXPLAIN QUERY PLAN {checked.sql}", params)
        return [{"id": r["id"], "parent": r["parent"], "detail": r["detail"]} for r in rows.rows]

    # -- the catalog --------------------------------------------------------------

    def _catalog(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        with self._connect(write=False) as conn:
            return self._run(conn, sql, params, CATALOG_LIMITS).rows

    def list_schemas(self) -> list[str]:
        return ["main"]

    def list_tables(self, schema: str | None = None) -> list[Table]:
        if schema not in (None, "main"):
            return []
        rows = self._catalog(
            "SELECT name, type FROM sqlite_master WHERE type IN ('table', 'view') "
            "AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name"
        )
        return [Table("main", r["name"], r["type"]) for r in rows]

    def describe(self, table: str, schema: str | None = None) -> tuple[Table, list[Column]]:
        schema, name = self.split_name(table, schema)
        found = [t for t in self.list_tables(schema or "main") if t.name == name]
        if not found:
            raise UnknownTable(table)
        quoted = '"' + name.replace('"', '""') + '"'
        rows = self._catalog(f"PRAGMA main.table_info({quoted})")
        columns = [
            Column(
                name=r["name"],
                type=r["type"] or "",
                # An INTEGER PRIMARY KEY is the rowid: never NULL, whatever the declaration says.
                nullable=not r["notnull"] and not (r["pk"] and (r["type"] or "").upper() == "INTEGER"),
                default=r["dflt_value"],
                primary_key=bool(r["pk"]),
            )
            for r in rows
        ]
        return found[0], columns


def _params(params: Sequence[Any]) -> list[Any]:
    import msgspec

    # SQLite binds scalars only: lists and objects go in as their JSON text.
    return [msgspec.json.encode(p).decode() if isinstance(p, list | dict) else p for p in params]


def _fetch(cursor: sqlite3.Cursor) -> Iterator[Sequence[Any]]:
    while batch := cursor.fetchmany(100):
        yield from batch
