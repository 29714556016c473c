"""The statement guard: which SQL the sql server agrees to run, decided on a parse.

A keyword filter (refuse anything not starting with SELECT, or containing DROP,
DELETE...) is both too strict and too weak: it refuses ``SELECT 'DROP'`` and
lets ``SELECT * INTO copy FROM t``, writable CTEs and ``COPY ... TO PROGRAM``
through. The guard instead parses the text with a real SQL parser (sqlglot) and
accepts exactly one statement of a read-only kind:

- a query (``SELECT``, ``WITH`` whose every part is a query, ``VALUES``,
  ``TABLE t``, set operations), with no ``SELECT ... INTO`` (it creates a table)
  and no ``FOR UPDATE/SHARE`` (it takes row locks);
- ``EXPLAIN`` of such a query (PostgreSQL's options and SQLite's ``QUERY PLAN``);
- PostgreSQL ``SHOW name``; SQLite ``PRAGMA`` of a few read-only pragmas.

Anything the parser cannot read is refused. On top of the parse, a short list of
PostgreSQL functions that reach outside the transaction (server files, large
objects, other connections, session locks, running SQL from a string) is refused
by name wherever the name appears in the text, string literals included: a name
hidden from the parser by a lexing difference between sqlglot and the server is
still caught, at the price of refusing a literal that merely mentions it (pass
such a value as a parameter instead).

The guard is the first of several layers, not the only one: the server also runs
the statement as a single statement (PostgreSQL's extended protocol) inside a
READ ONLY transaction that is always rolled back, and opens SQLite read-only
with an authorizer (see :mod:`mcpkit.servers.sql.postgres` and
:mod:`mcpkit.servers.sql.sqlite`).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["Checked", "Dialect", "Refused", "check_create_table", "check_read_only", "check_write"]

Dialect = Literal["postgres", "sqlite"]

#: The kinds of statement the read-only tools run.
Kind = Literal["query", "explain", "show", "pragma", "write"]


class Refused(ValueError):
    """The statement is not one the tool runs; the message says why (it goes to the model)."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        #: A short machine-readable reason: ``multiple-statements``, ``not-read-only``...
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Checked:
    """A statement the guard accepted: the text to run is exactly the text checked."""

    sql: str
    kind: Kind


# -- functions refused by name ----------------------------------------------------------

# Each reaches past what a READ ONLY transaction stops (or its rollback undoes):
# PostgreSQL runs them happily inside one. Grouped by why, for the message.
_PG_DENIED: dict[str, tuple[str, ...]] = {
    "reads or writes files on the database server": (
        "pg_read_file",
        "pg_read_binary_file",
        "pg_ls_[a-z_]*",
        "pg_stat_file",
        "pg_file_[a-z_]*",  # adminpack
        "pg_logdir_ls",
    ),
    "moves data between server files and large objects": (
        "lo_import",
        "lo_export",
        "lo_create",
        "lo_creat",
        "lo_unlink",
        "lo_open",
        "lo_close",
        "lo_put",
        "lo_get",
        "lo_from_bytea",
        "lo_truncate(?:64)?",
        "lo_lseek(?:64)?",
        "lo_tell(?:64)?",
        "loread",
        "lowrite",
    ),
    "opens another connection, outside this transaction": (
        "dblink[a-z_]*",
        "postgres_fdw_[a-z_]*",
    ),
    "takes session locks or changes session state that outlives the transaction": (
        "pg_advisory_[a-z_]*",
        "pg_try_advisory_[a-z_]*",
        "set_config",
        "pg_notify",
        "pg_export_snapshot",
    ),
    "runs SQL given as a string, out of the guard's sight": (
        "query_to_xml(?:schema|_and_xmlschema)?",
        "cursor_to_xml(?:schema)?",
        "ts_stat",
        "ts_rewrite",
    ),
    "controls the server or other sessions": (
        "pg_terminate_backend",
        "pg_cancel_backend",
        "pg_reload_conf",
        "pg_rotate_logfile",
        "pg_promote",
        "pg_switch_wal",
        "pg_create_[a-z_]*",
        "pg_drop_replication_slot",
        "pg_copy_[a-z_]*_replication_slot",
        "pg_replication_origin_[a-z_]*",
        "pg_replication_slot_advance",
        "pg_logical_[a-z_]*",
        "pg_wal_replay_[a-z_]*",
        "pg_backup_start",
        "pg_backup_stop",
        "pg_start_backup",
        "pg_stop_backup",
        "pg_stat_reset[a-z_]*",
        "pg_stat_statements_reset",
        "pg_import_system_collations",
        "pg_log_backend_memory_contexts",
    ),
    "advances a sequence or assigns a transaction id": (
        "nextval",
        "setval",
        "txid_current",
        "pg_current_xact_id",
    ),
}

_SQLITE_DENIED: dict[str, tuple[str, ...]] = {
    "loads native code into the database process": ("load_extension",),
    "reads or writes files": ("readfile", "writefile", "edit"),
    "is a known memory-safety hazard": ("fts3_tokenizer",),
}


def _name_pattern(
    groups: dict[str, tuple[str, ...]],
) -> tuple[re.Pattern[str], list[tuple[re.Pattern[str], str]]]:
    every = "|".join(p for patterns in groups.values() for p in patterns)
    # Identifier characters on either side make it another name (PostgreSQL
    # identifiers may hold letters, digits, _ and $).
    whole = re.compile(rf"(?<![\w$])(?:{every})(?![\w$])", re.IGNORECASE)
    why = [(re.compile(rf"(?:{'|'.join(ps)})", re.IGNORECASE), reason) for reason, ps in groups.items()]
    return whole, why


_DENIED = {"postgres": _name_pattern(_PG_DENIED), "sqlite": _name_pattern(_SQLITE_DENIED)}

# PostgreSQL's U&"..." identifiers spell names with escapes (U&"lo\005fimport"),
# which sqlglot does not read as one identifier: refused outright.
_UNICODE_IDENTIFIER = re.compile(r"u&\"", re.IGNORECASE)

#: Read-only pragmas (they only report; none of them has a setting form).
READ_ONLY_PRAGMAS = frozenset(
    {
        "table_info",
        "table_xinfo",
        "table_list",
        "index_list",
        "index_info",
        "index_xinfo",
        "foreign_key_list",
        "database_list",
        "collation_list",
    }
)

# EXPLAIN's option words (PostgreSQL 16's list), and the values they take.
_EXPLAIN_OPTIONS = frozenset(
    {
        "ANALYZE",
        "ANALYSE",
        "VERBOSE",
        "COSTS",
        "SETTINGS",
        "GENERIC_PLAN",
        "BUFFERS",
        "WAL",
        "TIMING",
        "SUMMARY",
        "FORMAT",
        "TEXT",
        "XML",
        "JSON",
        "YAML",
        "TRUE",
        "FALSE",
        "ON",
        "OFF",
        "1",
        "0",
    }
)

# Statement words that end or open a transaction, or change the session.
_TRANSACTION_CONTROL = frozenset(
    {"BEGIN", "START", "COMMIT", "END", "ROLLBACK", "ABORT", "SAVEPOINT", "RELEASE", "PREPARE"}
)
_SESSION_CHANGES = frozenset(
    {"SET", "RESET", "DISCARD", "LISTEN", "UNLISTEN", "LOAD", "DO", "COPY", "VACUUM"}
)


class _NoStatementText(logging.Filter):
    """Drops sqlglot's "... contains unsupported syntax" warnings: they quote the statement,
    and statements (and the values spelled in them) stay out of logs."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "unsupported syntax" not in str(record.msg)


def _sqlglot() -> Any:
    try:
        import sqlglot
    except ImportError as exc:
        raise ImportError(
            "the sql server needs sqlglot: pip install 'mcpkit[servers-sql]'", name="sqlglot"
        ) from exc
    sqlglot_logger = logging.getLogger("sqlglot")
    if not any(isinstance(f, _NoStatementText) for f in sqlglot_logger.filters):
        sqlglot_logger.addFilter(_NoStatementText())
    return sqlglot


def require() -> None:
    """Fail now, with the command that fixes it, when the parser is not installed."""
    _sqlglot()


def _statement_types() -> tuple[type, ...]:
    """sqlglot's classes for statements that are not queries (looked up by name: the
    set differs a little between sqlglot versions)."""
    from sqlglot import exp

    return tuple(
        cls for cls in (getattr(exp, name, None) for name in _STATEMENT_NAMES) if isinstance(cls, type)
    )


_STATEMENT_NAMES = (
    *("DML", "DDL", "Insert", "Update", "Delete", "Merge", "Copy", "Create", "Drop", "Alter", "AlterTable"),
    *("TruncateTable", "Command", "Transaction", "Commit", "Rollback", "Set", "SetItem", "Use", "Pragma"),
    *("Into", "Lock", "LoadData", "Analyze", "Grant", "Revoke", "Comment", "Describe", "Kill", "Declare"),
    *("Cache", "Uncache", "Refresh", "Attach", "Detach", "Execute", "ExecuteSql", "Show", "Summarize"),
    *("Install", "Export", "Undrop", "SwapTable", "AlterSession", "ConnectTo", "Disconnect", "NextValueFor"),
)
_STATEMENTS: tuple[type, ...] | None = None
# sqlglot (>= 29) files its statement classes in these modules: anything from them
# in a query's tree is a statement inside the query, whatever its name.
_STATEMENT_MODULES = ("sqlglot.expressions.ddl", "sqlglot.expressions.dml", "sqlglot.expressions.properties")


def _is_statement(node: Any) -> bool:
    global _STATEMENTS
    if _STATEMENTS is None:
        _STATEMENTS = _statement_types()
    cls = type(node)
    if cls.__name__ == "Heredoc":  # a dollar-quoted literal, filed with the DDL classes
        return False
    return isinstance(node, _STATEMENTS) or cls.__module__ in _STATEMENT_MODULES


def _refuse_denied_names(sql: str, dialect: Dialect) -> None:
    whole, why = _DENIED[dialect]
    found = whole.search(sql)
    if found is None:
        return
    name = found.group(0)
    reason = next((text for pattern, text in why if pattern.fullmatch(name)), "is not allowed")
    raise Refused(
        f"{name}() is refused: it {reason}, which no transaction setting stops. "
        "(The name is refused anywhere in the text; pass a value that mentions it as a parameter.)",
        "denied-function",
    )


def _tokens(sql: str, dialect: Dialect) -> list[Any]:
    from sqlglot.dialects.dialect import Dialect as SQLGlotDialect
    from sqlglot.errors import SqlglotError

    try:
        tokens: list[Any] = SQLGlotDialect.get_or_raise(dialect).tokenize(sql)
    except (SqlglotError, ValueError) as exc:
        raise Refused(f"the statement could not be parsed: {_first_line(exc)}", "unparseable") from None
    return tokens


def _parse(sql: str, dialect: Dialect) -> Any:
    """The one statement in ``sql`` (sqlglot's tree); refused when there are none or several."""
    sqlglot = _sqlglot()
    from sqlglot.errors import SqlglotError

    try:
        statements = [s for s in sqlglot.parse(sql, read=dialect) if s is not None]
    except (SqlglotError, ValueError, RecursionError) as exc:
        raise Refused(f"the statement could not be parsed: {_first_line(exc)}", "unparseable") from None
    if not statements:
        raise Refused("there is no statement to run", "empty")
    if len(statements) > 1:
        raise Refused(
            f"exactly one statement is allowed, and this text holds {len(statements)}",
            "multiple-statements",
        )
    return statements[0]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _prelude(sql: str, dialect: Dialect, max_length: int) -> tuple[Any, list[Any]]:
    _sqlglot()
    if len(sql) > max_length:
        raise Refused(f"the statement is longer than {max_length} characters (--max-sql-length)", "too-long")
    _refuse_denied_names(sql, dialect)
    if dialect == "postgres" and _UNICODE_IDENTIFIER.search(sql):
        raise Refused('U&"..." identifiers (Unicode escapes in names) are not accepted', "unicode-identifier")
    tokens = _tokens(sql, dialect)
    tree = _parse(sql, dialect)
    return tree, tokens


def check_read_only(sql: str, dialect: Dialect, *, max_length: int = 100_000) -> Checked:
    """Accept ``sql`` if it is exactly one read-only statement, else raise :class:`Refused`.

    The accepted text is returned unchanged: what runs is what was checked.
    """
    tree, tokens = _prelude(sql, dialect, max_length)
    first = tokens[0].text.upper()
    if first == "EXPLAIN":
        _check_explain(sql, tokens[0], dialect, max_length)
        return Checked(sql, "explain")
    if first == "SHOW" and dialect == "postgres":
        _check_show(sql, tokens[0], dialect)
        return Checked(sql, "show")
    if first == "PRAGMA" and dialect == "sqlite":
        _check_pragma(tokens)
        return Checked(sql, "pragma")
    _check_query(tree)
    return Checked(sql, "query")


def _check_query(tree: Any) -> None:
    from sqlglot import exp

    if not isinstance(tree, exp.Query | exp.Values) or _is_statement(tree):
        raise Refused(
            f"only read-only statements run here (SELECT, WITH, VALUES, EXPLAIN, SHOW), not {_kind(tree)}",
            "not-read-only",
        )
    for node in tree.walk():
        if isinstance(node, exp.Into) or (isinstance(node, exp.Select) and node.args.get("into")):
            raise Refused("SELECT ... INTO creates a table: not a read-only statement", "select-into")
        if isinstance(node, exp.Lock):
            raise Refused("FOR UPDATE / FOR SHARE takes row locks: not a read-only statement", "row-lock")
        if _is_statement(node):
            raise Refused(
                f"the query holds a {_kind(node)} statement (a data-modifying WITH or subquery): "
                "not a read-only statement",
                "writable-cte",
            )


def _kind(node: Any) -> str:
    from sqlglot import exp

    if isinstance(node, exp.Command):
        return str(node.this).upper()
    return type(node).__name__.upper()


def _rest_after(sql: str, token: Any, dialect: Dialect) -> tuple[str, list[Any]]:
    rest = sql[token.end + 1 :]
    return rest, _tokens(rest, dialect)


def _check_explain(sql: str, explain: Any, dialect: Dialect, max_length: int) -> None:
    rest, tokens = _rest_after(sql, explain, dialect)
    i = 0
    if dialect == "postgres":
        if tokens and tokens[0].text == "(":
            depth = 0
            for i, token in enumerate(tokens):  # noqa: B007 - i is where the options end
                if token.text == "(":
                    depth += 1
                elif token.text == ")":
                    depth -= 1
                    if depth == 0:
                        break
                elif token.text != "," and token.text.upper() not in _EXPLAIN_OPTIONS:
                    raise Refused(f"EXPLAIN option {token.text!r} is not accepted", "explain-option")
            else:
                raise Refused("EXPLAIN's option list is not closed", "unparseable")
            i += 1
        while i < len(tokens) and tokens[i].text.upper() in ("ANALYZE", "ANALYSE", "VERBOSE"):
            i += 1
    elif len(tokens) >= 2 and [t.text.upper() for t in tokens[:2]] == ["QUERY", "PLAN"]:
        i = 2
    if i >= len(tokens):
        raise Refused("EXPLAIN of what?", "empty")
    inner = check_read_only(rest[tokens[i].start :], dialect, max_length=max_length)
    if inner.kind != "query":
        raise Refused("EXPLAIN runs here only for a query (SELECT, WITH, VALUES)", "not-read-only")


def _check_show(sql: str, show: Any, dialect: Dialect) -> None:
    _, tokens = _rest_after(sql, show, dialect)
    if tokens and tokens[-1].text == ";":
        tokens = tokens[:-1]
    if not 1 <= len(tokens) <= 4 or not all(re.fullmatch(r"[A-Za-z_][\w.]*", t.text) for t in tokens):
        raise Refused("SHOW takes a setting's name (or ALL)", "unparseable")


def _check_pragma(tokens: list[Any]) -> None:
    words = [t.text for t in tokens[1:] if t.text != ";"]
    if "=" in words:
        raise Refused("PRAGMA ... = value changes a setting: not a read-only statement", "not-read-only")
    name = words[2] if len(words) > 2 and words[1] == "." else (words[0] if words else "")
    if name.lower() not in READ_ONLY_PRAGMAS:
        allowed = ", ".join(sorted(READ_ONLY_PRAGMAS))
        raise Refused(f"PRAGMA {name} is not one of the read-only pragmas ({allowed})", "not-read-only")


def check_write(sql: str, dialect: Dialect, *, max_length: int = 100_000) -> Checked:
    """Accept one statement for the write tool (``--allow-write``).

    Any kind of statement is accepted except those that would end or open the
    server's own transaction, change the session, run code blocks or copy files
    (``BEGIN``/``COMMIT``/``SET``/``DO``/``COPY``/``ATTACH``...), and the functions
    :func:`check_read_only` refuses by name: writing is what the user approved,
    reaching the host is not.
    """
    from sqlglot import exp

    tree, tokens = _prelude(sql, dialect, max_length)
    first = tokens[0].text.upper()
    controls = (exp.Transaction, exp.Commit, exp.Rollback)
    attach = (getattr(exp, "Attach", None), getattr(exp, "Detach", None))
    reaching = (exp.Set, exp.Copy, *(c for c in attach if c is not None))
    if first in _TRANSACTION_CONTROL or isinstance(tree, controls):
        raise Refused(
            f"{first} is refused: the server runs each statement in its own transaction",
            "transaction-control",
        )
    if first in _SESSION_CHANGES or first in ("ATTACH", "DETACH") or isinstance(tree, reaching):
        raise Refused(f"{first} is refused by the write tool too (it reaches past the data)", "not-allowed")
    for node in tree.walk():
        if isinstance(node, controls + reaching):
            raise Refused(f"{_kind(node)} is refused by the write tool", "not-allowed")
    return Checked(sql, "write")


def check_create_table(sql: str, dialect: Dialect, *, max_length: int = 100_000) -> Checked:
    """Accept one ``CREATE TABLE`` statement (``mcp-server-sqlite``'s ``create_table``
    tool): what :func:`check_write` accepts, and nothing but a table's creation."""
    from sqlglot import exp

    checked = check_write(sql, dialect, max_length=max_length)
    tree = _parse(sql, dialect)
    if not (isinstance(tree, exp.Create) and str(tree.args.get("kind") or "").upper() == "TABLE"):
        raise Refused(
            "create_table runs one CREATE TABLE statement; use write_query for others", "not-create-table"
        )
    return checked
