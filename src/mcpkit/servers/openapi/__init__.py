"""The OpenAPI server: an HTTP API's OpenAPI 3.0/3.1 document served as MCP tools (and, when
asked, GET endpoints as resources). Run it with ``mcpkit serve openapi SPEC --base-url URL``
or ``python -m mcpkit.servers.openapi SPEC ...``; SPEC is a file or an http(s) URL. See
``docs/openapi.md`` for the options and what the server does and does not defend against.
"""

from __future__ import annotations

import argparse
import sys

from ...server import MCPServer
from ...server.openapi import OpenAPIError, RouteMap
from .._serving import add_serving_arguments, serve

__all__ = ["build_parser", "build_server", "main"]

_EXTRA_HINT = "pip install 'mcpkit[openapi]'"


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    """The command line of ``python -m mcpkit.servers.openapi`` (and ``mcpkit serve openapi``)."""
    parser = argparse.ArgumentParser(
        prog=prog or "python -m mcpkit.servers.openapi",
        description="Serve an HTTP API described by an OpenAPI 3.0/3.1 document as MCP tools: one tool "
        "per operation (named by its operationId), HTTP errors as tool errors.",
    )
    parser.add_argument(
        "spec", metavar="SPEC", help="the OpenAPI document: a JSON or YAML file, or an http(s) URL"
    )
    parser.add_argument(
        "--base-url",
        metavar="URL",
        help="where the API is (default: the document's first absolute 'servers' URL)",
    )
    parser.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="'NAME: VALUE'",
        help="send this header with every API call (an API key, say); repeat for several. A header "
        "parameter of that name is then not a tool argument",
    )
    parser.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="REGEX",
        help="leave out the operations whose path matches REGEX (searched, e.g. '^/admin'); repeatable",
    )
    parser.add_argument(
        "--resources",
        action="append",
        default=[],
        metavar="REGEX",
        help="serve the GET operations whose path matches REGEX as resources (templates when the path "
        "has parameters) instead of tools; repeatable",
    )
    parser.add_argument(
        "--read-only", action="store_true", help="serve only GET (and HEAD) operations: nothing that writes"
    )
    parser.add_argument(
        "--timeout", type=float, default=30.0, metavar="SECONDS", help="per API call (default 30)"
    )
    parser.add_argument("--name", help="the server's name (default: the document's info.title)")
    add_serving_arguments(parser)
    return parser


def _headers(values: list[str], parser: argparse.ArgumentParser) -> dict[str, str]:
    headers: dict[str, str] = {}
    for value in values:
        name, sep, rest = value.partition(":")
        if not sep or not name.strip() or "\n" in value or "\r" in value:
            parser.error(f"--header wants 'NAME: VALUE', not {value!r}")
        headers[name.strip()] = rest.strip()
    return headers


def _load(spec: str, timeout: float) -> str:
    if spec.startswith(("http://", "https://")):
        import httpx

        response = httpx.get(spec, timeout=timeout, follow_redirects=True)
        response.raise_for_status()
        return response.text
    with open(spec, encoding="utf-8") as file:
        return file.read()


def build_server(args: argparse.Namespace, parser: argparse.ArgumentParser) -> MCPServer:
    """The server a parsed command line asks for (:class:`OpenAPIError` for a bad document)."""
    route_maps = [RouteMap(kind="exclude", pattern=p) for p in args.exclude]
    if args.read_only:
        route_maps.append(RouteMap(kind="exclude", methods=["POST", "PUT", "PATCH", "DELETE"]))
    route_maps += [RouteMap(kind="resource", methods=["GET"], pattern=p) for p in args.resources]
    return MCPServer.from_openapi(
        _load(args.spec, args.timeout),
        base_url=args.base_url,
        headers=_headers(args.header, parser),
        route_maps=route_maps,
        timeout=args.timeout,
        name=args.name,
    )


def main(argv: list[str] | None = None, *, prog: str | None = None) -> int:
    """Parse the command line, build the server and serve it (stdio by default); the exit status."""
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    label = parser.prog
    try:
        import httpx  # noqa: F401
    except ImportError as exc:
        print(f"{label}: a package it needs is missing ({exc}): {_EXTRA_HINT}", file=sys.stderr)
        return 2
    try:
        server = build_server(args, parser)
    except (OSError, OpenAPIError) as exc:
        print(f"{label}: cannot serve {args.spec}: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # httpx errors fetching SPEC
        print(f"{label}: cannot fetch {args.spec}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return serve(server, args, label)
