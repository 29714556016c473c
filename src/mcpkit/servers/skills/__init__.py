"""The mcpkit skills server: a directory of Agent Skills served over MCP
(``io.modelcontextprotocol/skills``, SEP-2640).

``mcpkit serve skills DIRECTORY...`` (or ``python -m mcpkit.servers.skills``)
serves every skill found under each DIRECTORY (a directory holding a
``SKILL.md``, searched below it; or DIRECTORY itself when it is one skill) as
``skill://`` resources, with ``skills/list``, ``skills/get`` and
``resources/directory/read``. Skills are checked when the server starts (a
bad one stops it with the reason), digests follow edits to the files, and
nothing outside the skills' files can be read. See ``docs/skills.md``.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from ...protocol.skills import MAX_SKILL_BYTES, MAX_SKILL_RESOURCES, SkillError
from ...server import MCPServer
from ...server.skills import SkillSettings
from .._serving import add_serving_arguments, byte_size, positive_int, serve

__all__ = ["build_parser", "build_server", "main"]


def build_server(
    directories: Sequence[str],
    *,
    prefix: str | None = None,
    settings: SkillSettings | None = None,
    name: str = "mcpkit-skills",
) -> MCPServer:
    """A server serving the skills under ``directories`` (raises ``SkillError`` for a bad one)."""
    server = MCPServer(
        name,
        instructions=(
            "This server serves Agent Skills (the io.modelcontextprotocol/skills extension): "
            "skills/list gives each skill's description and files; load a skill by reading its "
            "SKILL.md (resources/read), and its other files only when it asks for them."
        ),
    )
    server.add_skills(*directories, prefix=prefix, settings=settings)
    return server


def _seconds(text: str) -> float | None:
    if text.strip().lower() == "never":
        return None
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError("must be 0 or more")
    return value


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    """The command line of ``python -m mcpkit.servers.skills``."""
    parser = argparse.ArgumentParser(
        prog=prog or "python -m mcpkit.servers.skills",
        description=(
            "The mcpkit skills MCP server: Agent Skills served as skill:// resources with "
            "skills/list, skills/get and resources/directory/read (io.modelcontextprotocol/skills), "
            "each file with its size and sha256 digest."
        ),
        epilog=(
            "A DIRECTORY holding a SKILL.md is one skill; otherwise every directory below it "
            "holding a SKILL.md is (published under its path: acme/billing/refunds). Hidden files, "
            "__pycache__ and symlinks that lead out of a skill are never served."
        ),
    )
    parser.add_argument(
        "directories", nargs="+", metavar="DIRECTORY", help="a skills directory, or one skill"
    )
    parser.add_argument(
        "--prefix", default=None, help="publish the skills under skill://PREFIX/... (e.g. acme/billing)"
    )
    parser.add_argument(
        "--no-directory-read",
        action="store_true",
        help="do not declare directoryRead nor answer resources/directory/read",
    )
    parser.add_argument(
        "--max-file-bytes",
        type=byte_size,
        default=MAX_SKILL_BYTES,
        metavar="SIZE",
        help="largest file served (default 16M; K, M, G suffixes)",
    )
    parser.add_argument(
        "--max-skill-bytes",
        type=byte_size,
        default=MAX_SKILL_BYTES,
        metavar="SIZE",
        help="largest skill, its files summed (default 16M: what every host accepts)",
    )
    parser.add_argument(
        "--max-files",
        type=positive_int,
        default=MAX_SKILL_RESOURCES,
        metavar="N",
        help="most files in one skill, SKILL.md included (default 512: what every host accepts)",
    )
    parser.add_argument(
        "--refresh",
        type=_seconds,
        default=1.0,
        metavar="SECONDS",
        help="how often, at most, to look for edited files when asked for skills (default 1; "
        "0: on every request; never)",
    )
    parser.add_argument(
        "--include-hidden", action="store_true", help="also serve files whose names start with a dot"
    )
    add_serving_arguments(parser)
    return parser


def main(argv: list[str] | None = None, *, prog: str | None = None) -> int:
    """Run the server from a command line (``sys.argv[1:]`` by default); returns the exit status."""
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s", stream=sys.stderr)
    settings = SkillSettings(
        directory_read=not args.no_directory_read,
        max_file_bytes=args.max_file_bytes,
        max_skill_bytes=args.max_skill_bytes,
        max_files_per_skill=args.max_files,
        refresh_interval=args.refresh,
        include_hidden=args.include_hidden,
    )
    try:
        server = build_server(args.directories, prefix=args.prefix, settings=settings)
    except (SkillError, OSError) as exc:
        parser.exit(1, f"{parser.prog}: error: {exc}\n")
    # Anyone who reaches the port reads every skill (and nothing else: see docs/skills.md).
    return serve(
        server, args, parser.prog, label="skills", exposed_warning="serving skills beyond this machine"
    )
