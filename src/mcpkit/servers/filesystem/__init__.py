"""The filesystem reference server: ``python -m mcpkit.servers.filesystem DIR...``.

Tool-compatible with ``@modelcontextprotocol/server-filesystem`` (same tool names and
arguments), confined to the directories on its command line and the client's roots:
every path is resolved once with symlinks followed, checked, and then opened one name at
a time below a descriptor of its allowed directory with ``O_NOFOLLOW``, so neither
``..``, a symlink, a hard link to a file outside, nor a symlink swapped in during the call
leads out. See ``docs/servers/filesystem.md`` for the options and the threat model.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from ...server import MCPServer
from .._serving import byte_size, positive_int, serve
from ._access import Access, RootsPolicy, Settings
from ._sandbox import AllowedDir, FsError
from ._tools import READ_TOOLS, WRITE_TOOLS, register_tools

__all__ = ["READ_TOOLS", "WRITE_TOOLS", "build_parser", "build_server", "main"]

logger = logging.getLogger("mcpkit.servers.filesystem")

_INSTRUCTIONS = (
    "Reads and writes files inside the allowed directories only. Call list_allowed_directories "
    "first to learn them; paths outside them are refused."
)


def build_server(
    directories: Sequence[str],
    *,
    read_only: bool = False,
    roots: RootsPolicy = "narrow",
    max_read_bytes: int = 1 << 20,
    max_write_bytes: int = 1 << 20,
    max_entries: int = 10_000,
    max_depth: int = 64,
    allow_hardlinks: bool = False,
) -> MCPServer:
    """The filesystem server for ``directories`` (each must be an existing directory).

    ``read_only`` leaves the write tools out (not listed, not callable). ``roots`` says
    what the client's roots do: ``"narrow"`` the directories (the default), ``"replace"``
    them, or nothing (``"ignore"``). ``max_read_bytes`` caps what one call reads,
    ``max_write_bytes`` what one call writes, ``max_entries`` and ``max_depth`` what a
    tree or a search walks; ``allow_hardlinks`` lets files with several hard links be read.
    """
    settings = Settings(
        read_only=read_only,
        roots=roots,
        max_read_bytes=max_read_bytes,
        max_write_bytes=max_write_bytes,
        max_entries=max_entries,
        max_depth=max_depth,
        allow_hardlinks=allow_hardlinks,
    )
    dirs: list[AllowedDir] = []
    for directory in directories:
        allowed = AllowedDir.from_path(directory)
        if allowed not in dirs:
            dirs.append(allowed)
    access = Access(dirs, settings)
    # A request carries at most one file's content: room for the largest write, JSON-escaped.
    line_bytes = max(4 << 20, 2 * max_write_bytes + (64 << 10))
    server = MCPServer("filesystem", "1.0.0", instructions=_INSTRUCTIONS, max_line_bytes=line_bytes)
    server.on_roots_changed = access.roots_changed
    register_tools(server, access)
    return server


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    """The command line of ``python -m mcpkit.servers.filesystem``."""
    parser = argparse.ArgumentParser(
        prog=prog or "python -m mcpkit.servers.filesystem",
        description=(
            "The mcpkit filesystem MCP server: the tools of @modelcontextprotocol/server-filesystem, "
            "confined to the allowed directories (no .., symlink, hard-link or swapped-symlink escape)."
        ),
        epilog=(
            "Directories may also come from the client's roots (see --roots). Without directories "
            "on the command line, the server uses only the client's roots."
        ),
    )
    parser.add_argument(
        "directories",
        nargs="*",
        metavar="DIRECTORY",
        help="an allowed directory (its subdirectories too); one or more",
    )
    parser.add_argument(
        "--read-only",
        action="store_true",
        help=(
            "serve only the reading tools: write_file, edit_file, create_directory and "
            "move_file are not listed"
        ),
    )
    parser.add_argument(
        "--roots",
        choices=["narrow", "replace", "ignore"],
        default="narrow",
        help=(
            "what the client's roots do: narrow the allowed directories to the parts inside "
            "the roots (default; the roots alone when no DIRECTORY is given), replace them "
            "(as the community server does), or nothing"
        ),
    )
    parser.add_argument(
        "--max-read-bytes",
        type=byte_size,
        default=1 << 20,
        metavar="SIZE",
        help="most bytes one call reads, all files together (default 1M; K, M, G suffixes)",
    )
    parser.add_argument(
        "--max-write-bytes",
        type=byte_size,
        default=1 << 20,
        metavar="SIZE",
        help="most bytes one call writes (default 1M)",
    )
    parser.add_argument(
        "--max-entries",
        type=positive_int,
        default=10_000,
        metavar="N",
        help="most entries directory_tree and search_files walk (default 10000)",
    )
    parser.add_argument(
        "--max-depth",
        type=positive_int,
        default=64,
        metavar="N",
        help="deepest level directory_tree and search_files enter (default 64)",
    )
    parser.add_argument(
        "--allow-hardlinks",
        action="store_true",
        help=(
            "read files that have more than one hard link (refused by default: a hard link "
            "may share the content of a file outside the allowed directories)"
        ),
    )
    parser.add_argument(
        "--transport",
        choices=["stdio", "http"],
        default="stdio",
        help="stdio (default), or Streamable HTTP (and legacy HTTP+SSE) on --host:--port",
    )
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to bind for http (default: loopback only)"
    )
    parser.add_argument(
        "--port", type=int, default=8000, help="port for http (default 8000; 0: any free port)"
    )
    return parser


def main(argv: list[str] | None = None, *, prog: str | None = None) -> int:
    """Run the server from a command line (``sys.argv[1:]`` by default); returns the exit status."""
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s", stream=sys.stderr)
    usable: list[str] = []
    for directory in args.directories:
        try:
            AllowedDir.from_path(directory)
        except FsError as exc:
            # As the community server: an unusable directory is skipped, not fatal...
            logger.warning("skipping %s", exc)
        else:
            usable.append(directory)
    if args.directories and not usable:
        # ...unless none is usable: then nothing the operator meant to allow is there.
        parser.exit(1, f"{parser.prog}: none of the directories can be used\n")
    if not usable and args.roots == "ignore":
        parser.exit(2, f"{parser.prog}: no directories, and --roots ignore: nothing could be allowed\n")
    server = build_server(
        usable,
        read_only=args.read_only,
        roots=args.roots,
        max_read_bytes=args.max_read_bytes,
        max_write_bytes=args.max_write_bytes,
        max_entries=args.max_entries,
        max_depth=args.max_depth,
        allow_hardlinks=args.allow_hardlinks,
    )
    return serve(
        server,
        args,
        parser.prog,
        # Anyone who reaches the port reads (and writes) the allowed directories.
        exposed_warning=f"serving files on {args.host}, beyond this machine, without authentication",
        max_body_bytes=max(4 << 20, 2 * args.max_write_bytes),
    )
