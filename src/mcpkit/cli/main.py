"""``mcpkit`` entry point."""

from __future__ import annotations

import argparse
import sys

from .. import __version__

__all__ = ["main"]


def _run(args: argparse.Namespace) -> int:
    from .loader import load_server

    try:
        server = load_server(args.target)
    except (LookupError, ImportError, OSError) as exc:
        print(f"mcpkit run: {exc}", file=sys.stderr)
        return 2
    if args.transport == "stdio":
        server.run("stdio")
    else:
        server.run(args.transport, host=args.host, port=args.port)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mcpkit", description="Run and use MCP servers.")
    parser.add_argument("--version", action="version", version=f"mcpkit {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a server from FILE[:OBJECT] or MODULE[:OBJECT]")
    run.add_argument("target")
    run.add_argument("--transport", choices=["stdio", "http", "sse"], default="stdio")
    run.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback only)")
    run.add_argument("--port", type=int, default=8000)
    run.set_defaults(func=_run)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
