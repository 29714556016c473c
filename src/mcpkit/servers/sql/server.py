"""The sql server's MCP surface: tools, table schema resources, a prompt, structured errors."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator, Callable
from typing import Annotated, Any, TypeVar
from urllib.parse import quote, unquote

import msgspec

from ...protocol import types as t
from ...protocol.errors import INVALID_PARAMS, RESOURCE_NOT_FOUND_LEGACY, MCPError
from ...server.app import MCPServer
from ...server.context import Context
from ...server.middleware import CallNext, Middleware
from .backends import Backend, DatabaseError, Rows, UnknownTable
from .guard import Checked, Refused, check_create_table, check_read_only, check_write

__all__ = ["build_server"]

T = TypeVar("T")
_encode = msgspec.json.Encoder().encode

SQL = Annotated[str, "One SQL statement."]
PARAMS = Annotated[
    list[Any] | None,
    "Values for the statement's placeholders, in order ($1, $2... on PostgreSQL; ? on SQLite). "
    "Values go to the database apart from the SQL text: never splice them into it.",
]
# mcp-server-sqlite's tools take the statement as "query".
QUERY = Annotated[str, "One SQL statement."]

_READ_ONLY = t.ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
# Writes go through the host's permission prompt: hosts ask before a destructive tool runs.
_WRITE = t.ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False
)
_PLACEHOLDERS = {"postgres": "$1, $2, ...", "sqlite": "?"}


def build_server(backend: Backend, *, allow_write: bool = False) -> MCPServer:
    """The sql server for ``backend``: ``query``, ``list_schemas``, ``list_tables``,
    ``describe_table``, ``explain`` (and ``execute`` with ``allow_write``), the table
    schemas as resources, and the ``explain_query`` prompt.

    Statements are checked by :mod:`mcpkit.servers.sql.guard` and run by the
    backend under its limits; a refusal or a database error answers ``-32602``
    with the database's message, and ``availableTables`` in ``data`` when the
    statement named a table that does not exist.
    """
    label, limits = backend.label, backend.limits
    placeholders = _PLACEHOLDERS[backend.dialect]
    mode = "read-write (the execute tool writes)" if allow_write else "read-only"

    @contextlib.asynccontextmanager
    async def lifespan(_: MCPServer) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await asyncio.to_thread(backend.close)

    server = MCPServer(
        "mcpkit-sql",
        instructions=(
            f"A {label} database, {mode}. Start with list_tables and describe_table; query runs one "
            f"read-only statement (SELECT, WITH, VALUES, EXPLAIN, SHOW) with placeholders {placeholders} "
            f"bound from params. Results stop at {limits.max_rows} rows or {limits.max_bytes} bytes, "
            f"statements at {limits.statement_timeout:g} s."
        ),
        lifespan=lifespan,
    )
    resources = _TableResources(server, backend)
    server.add_middleware(resources)

    def invalid(exc: Exception) -> MCPError:
        return _invalid(exc, backend)

    def run(fn: Callable[[], T]) -> T:
        try:
            return fn()
        except (Refused, DatabaseError, UnknownTable) as exc:
            raise invalid(exc) from None

    @server.tool(
        description=(
            f"Run a read-only SQL query on the {label} database and return its rows as a JSON array of "
            "objects. Exactly one statement: SELECT, WITH (queries only), VALUES, EXPLAIN of those"
            + (", SHOW" if backend.dialect == "postgres" else ", read-only PRAGMAs")
            + f". Placeholders: {placeholders}, values in params. At most {limits.max_rows} rows and "
            f"{limits.max_bytes} bytes come back (the answer says when rows were cut: add LIMIT or narrow "
            f"the query); a statement is stopped after {limits.statement_timeout:g} s."
        ),
        annotations=_READ_ONLY,
        threaded=True,
    )
    def query(sql: SQL, params: PARAMS = None) -> t.CallToolResult:
        def go() -> Rows:
            checked = check_read_only(sql, backend.dialect, max_length=limits.max_sql_length)
            return backend.query(checked, params or [])

        return _rows_result(run(go))

    @server.tool(
        description=f"List the schemas of the {label} database that hold tables you can read.",
        annotations=_READ_ONLY,
        threaded=True,
    )
    def list_schemas() -> str:
        return _json(run(backend.list_schemas))

    @server.tool(
        description=(
            f"List the tables and views of the {label} database (of one schema if given): "
            "schema, name and type of each."
        ),
        annotations=_READ_ONLY,
        threaded=True,
    )
    def list_tables(schema: Annotated[str | None, "Only this schema's tables."] = None) -> str:
        tables = run(lambda: backend.list_tables(schema))
        return _json([{"schema": x.schema, "name": x.name, "type": x.type} for x in tables])

    @server.tool(
        description=(
            "Describe a table's columns: name, type, nullable, default and whether it is part of the "
            "primary key. An unknown table's error lists the tables there are."
        ),
        annotations=_READ_ONLY,
        threaded=True,
    )
    def describe_table(
        table_name: Annotated[str, "The table (or view); schema.table for one outside the default schema."],
        schema: Annotated[str | None, "The table's schema, if not in table_name."] = None,
    ) -> str:
        table, columns = run(lambda: backend.describe(table_name, schema))
        return _json(
            {
                "schema": table.schema,
                "name": table.name,
                "type": table.type,
                "columns": [dataclasses.asdict(c) for c in columns],
            }
        )

    @server.tool(
        description=(
            f"Show how the {label} database would run a read-only query (its plan, as JSON), without "
            "returning its rows."
            + (
                " analyze=true runs the query too and adds real times and row counts."
                if backend.dialect == "postgres"
                else ""
            )
        ),
        annotations=_READ_ONLY,
        threaded=True,
    )
    def explain(
        sql: SQL,
        params: PARAMS = None,
        analyze: Annotated[bool, "Run the query and report actual times (PostgreSQL)."] = False,
    ) -> str:
        def go() -> Any:
            checked = _query_only(sql, backend)
            return backend.explain(checked, params or [], analyze)

        return _json(run(go))

    if backend.dialect == "sqlite":
        # mcp-server-sqlite's names and arguments, so prompts written for it keep working.
        @server.tool(
            description=(
                "Run a read-only SELECT query on the SQLite database and return its rows as a JSON "
                "array of objects: the query tool under mcp-server-sqlite's name, with the same rules "
                "and limits."
            ),
            annotations=_READ_ONLY,
            threaded=True,
        )
        def read_query(query: QUERY, params: PARAMS = None) -> t.CallToolResult:
            def go() -> Rows:
                checked = check_read_only(query, backend.dialect, max_length=limits.max_sql_length)
                return backend.query(checked, params or [])

            return _rows_result(run(go))

    if allow_write:

        @server.tool(
            description=(
                f"Change the {label} database: run one INSERT, UPDATE, DELETE, or schema statement "
                f"(CREATE, ALTER, DROP...) in its own transaction, committed if it succeeds. Placeholders: "
                f"{placeholders}, values in params. Returns the rows affected, and RETURNING rows if any."
            ),
            annotations=_WRITE,
            threaded=True,
        )
        def execute(sql: SQL, params: PARAMS = None) -> t.CallToolResult:
            def go() -> Rows:
                checked = check_write(sql, backend.dialect, max_length=limits.max_sql_length)
                return backend.execute(checked, params or [])

            rows = run(go)
            return _rows_result(rows, affected=True)

        if backend.dialect == "sqlite":
            # mcp-server-sqlite's write tools: the execute tool's rules under their names.
            @server.tool(
                description=(
                    "Change the SQLite database: run one INSERT, UPDATE or DELETE (or schema statement) in "
                    "its own transaction, committed if it succeeds: the execute tool under "
                    "mcp-server-sqlite's name. Returns the rows affected."
                ),
                annotations=_WRITE,
                threaded=True,
            )
            def write_query(query: QUERY, params: PARAMS = None) -> t.CallToolResult:
                def go() -> Rows:
                    checked = check_write(query, backend.dialect, max_length=limits.max_sql_length)
                    return backend.execute(checked, params or [])

                return _rows_result(run(go), affected=True)

            @server.tool(
                description="Create a table in the SQLite database: one CREATE TABLE statement.",
                annotations=_WRITE,
                threaded=True,
            )
            def create_table(query: Annotated[str, "One CREATE TABLE statement."]) -> str:
                def go() -> Rows:
                    checked = check_create_table(query, backend.dialect, max_length=limits.max_sql_length)
                    return backend.execute(checked, [])

                run(go)
                return "Table created successfully"

    @server.resource(
        f"{backend.resource_base}/{{table}}/schema",
        name="table schema",
        description="A table's columns (column_name, data_type), as JSON.",
        mime_type="application/json",
    )
    async def table_schema(table: str, ctx: Context) -> str:
        return await resources.read(unquote(table), f"{backend.resource_base}/{table}/schema", ctx)

    @server.prompt(description="Explain a SQL query execution plan in plain language.")
    def explain_query(sql: Annotated[str, "The SQL query to explain."]) -> str:
        try:
            checked = _query_only(sql, backend)
            plan = _json(backend.explain(checked, [], False))
        except (Refused, DatabaseError) as exc:
            raise invalid(exc) from None
        return (
            f"Explain in plain language how the {label} database runs this query, step by step, "
            f"and what would make it faster.\n\nThe query:\n\n{sql}\n\nIts plan:\n\n{plan}"
        )

    return server


def _query_only(sql: str, backend: Backend) -> Checked:
    checked = check_read_only(sql, backend.dialect, max_length=backend.limits.max_sql_length)
    if checked.kind != "query":
        raise Refused("explain takes a query (SELECT, WITH, VALUES): it adds EXPLAIN itself", "not-a-query")
    return checked


def _json(value: Any) -> str:
    from .backends import jsonable

    return _encode(jsonable(value)).decode()


def _rows_result(rows: Rows, *, affected: bool = False) -> t.CallToolResult:
    """The rows as the community server answers them (a JSON array of objects), then
    a note when they were cut, or (writes) how many rows changed."""
    content: list[t.ContentBlock] = []
    if affected:
        count = "an unknown number of" if rows.affected is None else str(rows.affected)
        content.append(t.TextContent(text=f"{count} row(s) affected"))
        if rows.columns:
            content.append(t.TextContent(text=_encode(rows.rows).decode()))
    else:
        content.append(t.TextContent(text=_encode(rows.rows).decode()))
    if rows.truncated:
        content.append(
            t.TextContent(
                text=f"Only the first {len(rows.rows)} rows are shown: the result has {rows.truncated}. "
                "Add LIMIT/OFFSET or narrow the query for the rest."
            )
        )
    return t.CallToolResult(content=content, is_error=False)


def _available(backend: Backend) -> list[str] | None:
    try:
        return backend.table_names()
    except (DatabaseError, UnknownTable):
        return None


def _invalid(exc: Exception, backend: Backend) -> MCPError:
    """The seed documents' structured error: -32602, the database's own message, and for
    an unknown table the tables there are (``data.availableTables``)."""
    if isinstance(exc, Refused):
        return MCPError(INVALID_PARAMS, f"Refused: {exc}", {"reason": exc.reason})
    data: dict[str, Any] = {}
    if isinstance(exc, DatabaseError):
        data.update(exc.data)
        unknown = exc.unknown_table
        message = exc.message
    else:
        unknown, message = True, str(exc)
    if unknown:
        tables = _available(backend)
        if tables is not None:
            data["availableTables"] = tables
    return MCPError(INVALID_PARAMS, message, data or None)


class _TableResources(Middleware):
    """Lists one schema resource per table, as the community server does: the list is
    read from the database at each ``resources/list``, so new tables appear and dropped
    ones go (and subscribed clients hear that the list changed)."""

    def __init__(self, server: MCPServer, backend: Backend) -> None:
        self.server = server
        self.backend = backend
        self.listed: set[str] = set()
        self._lock = asyncio.Lock()

    def uri(self, name: str) -> str:
        return f"{self.backend.resource_base}/{quote(name, safe='.')}/schema"

    async def on_list_resources(self, ctx: Context, call_next: CallNext) -> Any:
        async with self._lock:
            try:
                names = await asyncio.to_thread(self.backend.table_names)
            except DatabaseError as exc:
                raise _invalid(exc, self.backend) from None
            wanted = {self.uri(name): name for name in names}
            for uri in self.listed - wanted.keys():
                self.server.remove_resource(uri)
            for uri, name in wanted.items():
                if uri not in self.listed:
                    self.server.add_raw_resource(
                        t.Resource(
                            uri=uri,
                            name=f'"{name}" database schema',
                            description=f"The columns of {name} (column_name, data_type), as JSON.",
                            mime_type="application/json",
                        ),
                        self._reader(name),
                    )
            self.listed = set(wanted)
        return await call_next(ctx)

    def _reader(self, name: str) -> Callable[..., Any]:
        async def reader(uri: str, ctx: Context) -> list[t.ResourceContents]:
            text = await self.read(name, uri, ctx)
            return [t.ResourceContents(uri=uri, mime_type="application/json", text=text)]

        return reader

    async def read(self, name: str, uri: str, ctx: Context) -> str:
        """The table's columns as the community server gives them: ``column_name``, ``data_type``."""
        try:
            _, columns = await asyncio.to_thread(self.backend.describe, name)
        except UnknownTable:
            tables = await asyncio.to_thread(_available, self.backend)
            # Resource not found: -32002 through 2025-11-25, -32602 from 2026-07-28.
            code = INVALID_PARAMS if ctx.is_modern else RESOURCE_NOT_FOUND_LEGACY
            raise MCPError(
                code, f"Table {name!r} does not exist", {"uri": uri, "availableTables": tables or []}
            ) from None
        except DatabaseError as exc:
            raise _invalid(exc, self.backend) from None
        return _encode([{"column_name": c.name, "data_type": c.type} for c in columns]).decode()
