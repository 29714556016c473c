"""The sql reference server: PostgreSQL or SQLite, read-only enforced in depth.

``python -m mcpkit.servers.sql postgresql://user@host/db`` (or ``sqlite:///path/to.db``)
serves, over stdio by default, the tools of ``@modelcontextprotocol/server-postgres``
(``query`` with its ``sql`` argument, and the table schemas as resources at
``postgres://user@host:port/<table>/schema``) plus ``list_schemas``, ``list_tables``,
``describe_table`` (``table_name``, as ``mcp-server-sqlite`` names it) and ``explain``;
on SQLite also ``mcp-server-sqlite``'s ``read_query`` (and, writing, ``write_query`` and
``create_table``).

A statement runs only if a SQL parser finds exactly one read-only statement in it
(:mod:`.guard`), and then inside a READ ONLY transaction it cannot end, over
PostgreSQL's extended protocol (:mod:`.postgres`), or on a SQLite file opened
read-only under an authorizer (:mod:`.sqlite`). ``--allow-write`` adds an
``execute`` tool (and on SQLite ``write_query`` and ``create_table``) annotated
``destructiveHint``, so hosts ask the user first.
See docs/servers/sql.md for the threat model.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Sequence

from .._serving import serve
from .backends import Backend, Limits
from .guard import Checked, Refused, check_read_only, check_write
from .server import build_server

__all__ = [
    "Backend",
    "Checked",
    "Limits",
    "Refused",
    "build_parser",
    "build_server",
    "check_read_only",
    "check_write",
    "main",
    "open_backend",
]

PROG = "python -m mcpkit.servers.sql"


def open_backend(url: str, limits: Limits, *, allow_write: bool = False, pool_size: int = 4) -> Backend:
    """The backend a database URL names (``postgresql://``/``postgres://``, ``sqlite:``),
    connected: a database that cannot be reached fails here, not at the first call."""
    from .guard import require

    require()
    scheme = url.partition(":")[0].lower()
    if scheme in ("postgresql", "postgres"):
        from .postgres import PostgresBackend

        return PostgresBackend(url, limits, allow_write=allow_write, pool_size=pool_size)
    if scheme == "sqlite":
        from .sqlite import SQLiteBackend, sqlite_path

        return SQLiteBackend(sqlite_path(url), limits, allow_write=allow_write)
    raise ValueError(
        f"unsupported database URL scheme {scheme + ':' if scheme else '(none)'}: "
        "use postgresql://user@host:port/dbname or sqlite:///path/to.db"
    )


def _positive(kind: type[int] | type[float]) -> Callable[[str], int | float]:
    def parse(text: str) -> int | float:
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be more than 0, not {text}")
        return value

    parse.__name__ = kind.__name__
    return parse


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    """The command line of ``python -m mcpkit.servers.sql`` (and ``mcpkit serve sql``)."""
    defaults = Limits()
    parser = argparse.ArgumentParser(
        prog=prog or PROG,
        description=(
            "An MCP server for a PostgreSQL or SQLite database, read-only unless --allow-write: "
            "one statement per call, checked by a SQL parser, run in a READ ONLY transaction "
            "(PostgreSQL) or on a read-only file under an authorizer (SQLite)."
        ),
        epilog=(
            "Keep a PostgreSQL password out of the command line (other users can see it): put it in "
            "PGPASSWORD or ~/.pgpass, or pass the URL in DATABASE_URL. Connect as a dedicated read-only "
            "role: see the sql server's documentation for the SQL."
        ),
    )
    parser.add_argument(
        "database_url",
        nargs="?",
        metavar="DATABASE_URL",
        help="postgresql://user@host:port/dbname or sqlite:///path/to.db (default: $DATABASE_URL)",
    )
    parser.add_argument(
        "--db-path",
        metavar="PATH",
        help="a SQLite file, as mcp-server-sqlite takes it (the same as sqlite:///PATH; it must exist)",
    )
    parser.add_argument(
        "--allow-write",
        action="store_true",
        help="add the execute tool (INSERT, UPDATE, DELETE, DDL), and on SQLite write_query and "
        "create_table, annotated destructive so that hosts ask the user before each call; off by default",
    )
    parser.add_argument(
        "--max-rows",
        type=_positive(int),
        default=defaults.max_rows,
        metavar="N",
        help=f"rows returned at most; the answer says when rows were cut (default {defaults.max_rows})",
    )
    parser.add_argument(
        "--max-bytes",
        type=_positive(int),
        default=defaults.max_bytes,
        metavar="N",
        help=f"bytes of JSON a result returns at most (default {defaults.max_bytes})",
    )
    parser.add_argument(
        "--statement-timeout",
        type=_positive(float),
        default=defaults.statement_timeout,
        metavar="SECONDS",
        help=f"a statement running longer is cancelled (default {defaults.statement_timeout:g})",
    )
    parser.add_argument(
        "--max-sql-length",
        type=_positive(int),
        default=defaults.max_sql_length,
        metavar="N",
        help=f"characters of SQL accepted in one call (default {defaults.max_sql_length})",
    )
    parser.add_argument(
        "--pool-size",
        type=_positive(int),
        default=4,
        metavar="N",
        help="PostgreSQL connections used for reads at once (default 4)",
    )
    parser.add_argument(
        "--transport",
        choices=("stdio", "http"),
        default="stdio",
        help="stdio (default), or Streamable HTTP (both protocol eras, at /mcp)",
    )
    parser.add_argument("--host", default="127.0.0.1", help="HTTP: address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, help="HTTP: port (default 8000; 0 picks a free one)")
    return parser


def main(argv: Sequence[str] | None = None, *, prog: str | None = None) -> int:
    """Run the sql server with the command line ``argv`` (default ``sys.argv[1:]``);
    returns the exit status."""
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    if args.db_path is not None:
        if args.database_url:
            parser.error("give a DATABASE_URL or --db-path, not both")
        # mcp-server-sqlite's option, so a host config written for it keeps working.
        args.database_url = "sqlite://" + os.path.abspath(os.path.expanduser(args.db_path))
    url = args.database_url or os.environ.get("DATABASE_URL")
    if not url:
        parser.error("a database URL is needed (postgresql://... or sqlite:///path/to.db), or DATABASE_URL")
    if args.port is not None and args.transport != "http":
        parser.error("--port goes with --transport http (without it the server speaks stdio)")
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(levelname)s: %(message)s")
    limits = Limits(
        max_rows=args.max_rows,
        max_bytes=args.max_bytes,
        statement_timeout=args.statement_timeout,
        max_sql_length=args.max_sql_length,
    )
    try:
        backend = open_backend(url, limits, allow_write=args.allow_write, pool_size=args.pool_size)
    except ImportError as exc:
        print(f"{parser.prog}: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # the database's own reason, without the URL's password
        from .postgres import redact

        print(f"{parser.prog}: cannot open the database: {redact(str(exc), url)}", file=sys.stderr)
        return 1
    server = build_server(backend, allow_write=args.allow_write)
    if args.transport == "http":
        args.port = 8000 if args.port is None else args.port
        return serve(server, args, parser.prog, label=backend.label)
    server.run()
    return 0
