"""What the two databases have in common: limits, results, errors, the backend interface."""

from __future__ import annotations

import math
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

import msgspec

from .guard import Checked, Dialect

__all__ = [
    "CATALOG_LIMITS",
    "Backend",
    "Column",
    "DatabaseError",
    "Limits",
    "Rows",
    "Table",
    "UnknownTable",
    "collect",
    "jsonable",
]

_encode = msgspec.json.Encoder().encode


@dataclass(frozen=True, slots=True)
class Limits:
    """The limits every statement runs under (each a command-line option)."""

    #: Rows returned at most (``--max-rows``); more are cut, and the answer says so.
    max_rows: int = 1000
    #: Bytes of JSON returned at most (``--max-bytes``).
    max_bytes: int = 256 * 1024
    #: Seconds a statement may run (``--statement-timeout``): PostgreSQL's
    #: ``statement_timeout``, SQLite's progress handler.
    statement_timeout: float = 10.0
    #: Characters of SQL accepted at most (``--max-sql-length``).
    max_sql_length: int = 100_000


#: What the server's own catalog reads (tables, columns) may return: not the user's limits.
CATALOG_LIMITS = Limits(max_rows=1_000_000, max_bytes=1 << 30)


@dataclass(slots=True)
class Rows:
    """A statement's result, cut to the limits."""

    columns: list[str]
    rows: list[dict[str, Any]]
    #: Why the rows were cut (None when all are here).
    truncated: str | None = None
    #: Rows affected (writes), when the database says.
    affected: int | None = None


@dataclass(frozen=True, slots=True)
class Table:
    """A table or view."""

    schema: str
    name: str
    type: str

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.name}"


@dataclass(frozen=True, slots=True)
class Column:
    """A column as ``describe_table`` reports it."""

    name: str
    type: str
    nullable: bool
    default: str | None
    primary_key: bool


@dataclass(slots=True)
class DatabaseError(Exception):
    """The database refused or failed the statement: its own message, and details
    for the JSON-RPC error's ``data`` (``sqlstate``, ``detail``, ``hint``...)."""

    message: str
    data: dict[str, Any] = field(default_factory=dict)
    #: The statement named a table that does not exist.
    unknown_table: bool = False

    def __str__(self) -> str:
        return self.message


class UnknownTable(LookupError):
    """``describe_table`` or a schema resource named a table that does not exist."""

    def __init__(self, name: str) -> None:
        super().__init__(f"Table {name!r} does not exist")
        self.name = name


def jsonable(value: Any) -> Any:
    """A database value as JSON: exact numbers as text (Decimal), times in ISO 8601,
    bytes as PostgreSQL's ``\\x`` hex, anything else unknown as its text."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return "\\x" + bytes(value).hex()
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, timedelta | uuid.UUID):
        return str(value)
    if isinstance(value, list | tuple):
        return [jsonable(item) for item in value]
    if isinstance(value, dict):
        return {str(key): jsonable(item) for key, item in value.items()}
    return str(value)


def unique_names(names: Sequence[str]) -> list[str]:
    """Column names made unique (``SELECT 1 AS a, 2 AS a`` gives ``a`` and ``a_2``), so
    that no column is lost when rows become JSON objects."""
    seen: set[str] = set()
    out: list[str] = []
    for name in names:
        candidate, n = name, 1
        while candidate in seen:
            n += 1
            candidate = f"{name}_{n}"
        seen.add(candidate)
        out.append(candidate)
    return out


def collect(columns: Sequence[str], rows: Iterable[Sequence[Any]], limits: Limits) -> Rows:
    """Rows as JSON objects, stopping at ``max_rows`` rows or ``max_bytes`` bytes of JSON.

    The caller's iterator is left unfinished when a limit is reached: it must stop
    the statement itself (PostgreSQL cancels it, SQLite resets it).
    """
    names = unique_names(columns)
    out: list[dict[str, Any]] = []
    size = 2  # "[]"
    truncated = None
    for row in rows:
        if len(out) >= limits.max_rows:
            truncated = f"more than {limits.max_rows} rows (--max-rows)"
            break
        item = {name: jsonable(value) for name, value in zip(names, row, strict=False)}
        size += len(_encode(item)) + 1
        if size > limits.max_bytes:
            truncated = f"more than {limits.max_bytes} bytes of JSON (--max-bytes)"
            break
        out.append(item)
    return Rows(columns=names, rows=out, truncated=truncated)


class Backend(ABC):
    """One database, reached the way :mod:`mcpkit.servers.sql` runs statements.

    Methods are synchronous and thread-safe (the server calls them from worker
    threads); each raises :class:`DatabaseError` for what the database refuses.
    """

    #: The dialect the guard parses for.
    dialect: Dialect
    #: "PostgreSQL" or "SQLite", for messages.
    label: str
    #: Where table schema resources live: ``{base}/{table}/schema``.
    resource_base: str
    #: The schema a bare table name belongs to (``public``, ``main``).
    default_schema: str

    def __init__(self, limits: Limits) -> None:
        self.limits = limits

    @abstractmethod
    def query(self, checked: Checked, params: Sequence[Any]) -> Rows:
        """Run a read-only statement the guard accepted (read-only connection and transaction)."""

    @abstractmethod
    def execute(self, checked: Checked, params: Sequence[Any]) -> Rows:
        """Run a write (``--allow-write``) in its own transaction, committed if it succeeds."""

    @abstractmethod
    def explain(self, checked: Checked, params: Sequence[Any], analyze: bool) -> Any:
        """The query plan of a query the guard accepted, as JSON."""

    @abstractmethod
    def list_schemas(self) -> list[str]:
        """The schemas a table can live in (PostgreSQL's non-system schemas; SQLite's ``main``)."""

    @abstractmethod
    def list_tables(self, schema: str | None = None) -> list[Table]:
        """Tables and views (of one schema, or of all), sorted."""

    @abstractmethod
    def describe(self, table: str, schema: str | None = None) -> tuple[Table, list[Column]]:
        """A table's columns; :class:`UnknownTable` if there is no such table."""

    def table_names(self) -> list[str]:
        """Every table's name as a user would write it: bare in the default schema,
        ``schema.table`` elsewhere (for ``availableTables`` in errors)."""
        return [t.name if t.schema == self.default_schema else t.qualified for t in self.list_tables()]

    def split_name(self, table: str, schema: str | None) -> tuple[str | None, str]:
        """``schema.table`` split when no schema is given (a name with a dot that names no
        table as a whole is read as qualified)."""
        if schema is None and "." in table:
            first, _, rest = table.partition(".")
            return first, rest
        return schema, table

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections."""
