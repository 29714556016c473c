"""The fetch reference server: web pages as Markdown for a model, without becoming an SSRF gateway.

Run it with ``python -m mcpkit.servers.fetch [OPTIONS]`` (stdio) or
``--transport http --port N``. It keeps the community ``mcp-server-fetch``'s tool
(``fetch(url, max_length, start_index, raw)``) and prompt (``fetch(url)``), and
adds an SSRF guard that is on by default: only http(s), every hop's host resolved
once and the connection pinned to the checked address, non-public addresses
refused unless ``--allow-host`` / ``--allow-private`` open them. See
``docs/servers/fetch.md`` for the options and the threat model.
"""

from __future__ import annotations

import argparse
import sys

from .._serving import add_serving_arguments, serve
from .guard import AddressPolicy, FetchRefused, check_url, parse_ipv4_number
from .server import (
    DEFAULT_MAX_BYTES,
    DEFAULT_USER_AGENT_AUTONOMOUS,
    DEFAULT_USER_AGENT_MANUAL,
    FetchSettings,
    build_server,
)
from .web import Fetcher, FetchError

__all__ = [
    "AddressPolicy",
    "FetchError",
    "FetchRefused",
    "FetchSettings",
    "Fetcher",
    "build_parser",
    "build_server",
    "check_url",
    "main",
    "parse_ipv4_number",
    "settings_from_args",
]

_EXTRA_HINT = "pip install 'mcpkit[servers-fetch]'"


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be at least 0, not {value}")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0, not {text}")
    return value


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    """The command line of ``python -m mcpkit.servers.fetch`` (and ``mcpkit serve fetch``)."""
    parser = argparse.ArgumentParser(
        prog=prog or "python -m mcpkit.servers.fetch",
        description="An MCP server that fetches web pages and returns them as Markdown (tool and prompt "
        "'fetch', compatible with mcp-server-fetch). Only public addresses are fetched unless "
        "--allow-host or --allow-private say otherwise; every redirect is checked the same way.",
    )
    policy = parser.add_argument_group("what may be fetched")
    policy.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="HOST",
        help="also fetch from HOST although it is not public: a host name (as written in URLs; "
        "reachable whatever it resolves to), an address or a CIDR network (reachable under any "
        "name); repeat for several",
    )
    policy.add_argument(
        "--allow-private",
        # mcp-server-fetch's spelling too, so host configs written for it keep working.
        "--allow-private-ips",
        action="store_true",
        dest="allow_private",
        help="also fetch from loopback, private, link-local and other non-public addresses, "
        "except the cloud metadata addresses (only --allow-host opens those)",
    )
    policy.add_argument(
        "--ignore-robots-txt",
        action="store_true",
        help="fetch pages even when the site's robots.txt forbids it (the tool obeys robots.txt by "
        "default; the prompt, which the user triggers, never consults it)",
    )
    limits = parser.add_argument_group("limits")
    limits.add_argument(
        "--max-bytes",
        type=_positive_int,
        default=DEFAULT_MAX_BYTES,
        metavar="N",
        help=f"read at most N bytes of a response, after decompression (default {DEFAULT_MAX_BYTES}); "
        "a longer page is cut and says so",
    )
    limits.add_argument(
        "--timeout",
        type=_positive_float,
        default=30.0,
        metavar="SECONDS",
        help="give up on a fetch (robots.txt, redirects and body together) after SECONDS (default 30)",
    )
    limits.add_argument(
        "--max-redirects",
        type=_non_negative_int,
        default=5,
        metavar="N",
        help="follow at most N redirects, each checked like the first URL (default 5)",
    )
    requests = parser.add_argument_group("requests")
    requests.add_argument(
        "--user-agent",
        metavar="UA",
        help="the User-Agent header of every request, and the name robots.txt rules are matched "
        f"against (default: {DEFAULT_USER_AGENT_AUTONOMOUS!r} for the tool, "
        f"{DEFAULT_USER_AGENT_MANUAL!r} for the prompt)",
    )
    requests.add_argument(
        "--ca-file",
        metavar="PATH",
        help="trust the certificates in PATH (PEM) for https instead of the default bundle",
    )
    add_serving_arguments(parser)
    return parser


def settings_from_args(args: argparse.Namespace) -> FetchSettings:
    """The :class:`FetchSettings` a parsed command line asks for."""
    return FetchSettings(
        user_agent=args.user_agent,
        ignore_robots_txt=args.ignore_robots_txt,
        allow_hosts=tuple(args.allow_host),
        allow_private=args.allow_private,
        max_bytes=args.max_bytes,
        timeout=args.timeout,
        max_redirects=args.max_redirects,
        ca_file=args.ca_file,
    )


def main(argv: list[str] | None = None, *, prog: str | None = None) -> int:
    """Parse the command line, build the server and serve it (stdio by default); the exit status."""
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    try:
        import bs4  # noqa: F401
        import httpx  # noqa: F401
        import markdownify  # noqa: F401
    except ImportError as exc:
        print(f"fetch server: a package it needs is missing ({exc}): {_EXTRA_HINT}", file=sys.stderr)
        return 2
    try:
        server = build_server(settings_from_args(args))
    except ValueError as exc:
        parser.error(str(exc))
    return serve(server, args, "fetch server")
