"""``mcpkit`` entry point: run, use, inspect, install and gateway MCP servers.

Exit codes: 0 success, 1 other errors (config files, file system), 2 usage
(bad command line, unknown target), 3 connection failed or lost, 4 the server
answered with an error (a protocol error, or a tool result with ``isError``),
130 interrupted, 143 terminated (SIGTERM while ``mcpkit call`` follows a task,
which it cancels first).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence

from .._version import __version__
from ._commands import Commands, _lazy, _Parser, _server_names
from ._manage_parsers import _add_audit, _add_config, _add_gateway, _add_install, _add_pins, _add_uninstall
from ._output import EXIT_ERROR, EXIT_INTERRUPTED, EXIT_USAGE, CLIError, Console
from ._use_parsers import _add_call, _add_inspect, _add_list, _add_prompt, _add_read, _add_skills, _add_task

__all__ = ["build_parser", "main"]


# -- handlers (imported lazily: `mcpkit run` stays as light as the server) -----------


def _run(args: argparse.Namespace, console: Console) -> int:
    from .loader import load_server

    if args.command_argv is not None:
        raise CLIError("mcpkit run takes no command after --", EXIT_USAGE)
    if args.transport == "stdio" and (args.workers != 1 or args.redis or args.stateless):
        raise CLIError("--workers, --redis and --stateless need --transport http", EXIT_USAGE)
    if args.transport != "stdio":
        from .workers import WorkersError, check_workers

        try:
            check_workers(args.workers, stateless=args.stateless, redis_url=args.redis)
        except WorkersError as exc:
            raise CLIError(str(exc), EXIT_USAGE) from None
        from ..transports.http.runner import HTTP_EXTRA_HINT, http_extra_missing

        if http_extra_missing() is not None:
            raise CLIError(
                "serving HTTP needs the http extra, which is not installed", EXIT_ERROR, hint=HTTP_EXTRA_HINT
            )
    try:
        server = load_server(args.target)  # in the parent too: a bad target is a usage error here
    except (LookupError, ImportError, OSError) as exc:
        raise CLIError(str(exc), EXIT_USAGE) from None
    if args.transport == "stdio":
        server.run("stdio")
        return 0
    from ._serve import serve_http_command

    return serve_http_command(args, server, console)


# -- the parser ----------------------------------------------------------------------

EPILOG = """\
targets (list, call, read, prompt, inspect; task: URLs and NAMEs of URLs only):
  http(s)://HOST/PATH        a Streamable HTTP endpoint (falls back to HTTP+SSE)
  FILE.py[:OBJECT]           a Python server file, run with this interpreter over stdio
  -- COMMAND ARGS...         any stdio server command, after everything else
  NAME                       a server from --config FILE (default ./.mcp.json)

examples:
  mcpkit list server.py
  mcpkit call server.py add a=1 b=2
  mcpkit call echo message=hi -- npx -y @modelcontextprotocol/server-everything
  mcpkit read https://example.com/mcp config://app --header 'Authorization: Bearer TOKEN'
  mcpkit task get http://127.0.0.1:8000/mcp TASK_ID
  mcpkit serve filesystem ~/Documents --read-only
  mcpkit install claude-desktop server.py --name weather
  mcpkit install claude-desktop --name docs --server filesystem ~/Documents --read-only
  mcpkit config check ~/.cursor/mcp.json
  mcpkit gateway .mcp.json --transport http --port 8000 --deny mcp__github__delete_repo
  mcpkit audit-servers .mcp.json --fail-on medium

exit codes: 0 ok, 1 error, 2 usage, 3 connection failed, 4 protocol or tool error
"""


def build_parser() -> argparse.ArgumentParser:
    """The ``mcpkit`` parser: one sub-command per ``_add_*`` function listed below."""
    parser = _Parser(
        prog="mcpkit",
        description="Run, use, inspect and install MCP servers.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"mcpkit {__version__}")
    commands = parser.add_subparsers(dest="cmd", metavar="COMMAND", required=True, parser_class=_Parser)
    # The order here is the order of `mcpkit --help`.
    for add in (
        _add_run,
        _add_serve,
        _add_list,
        _add_call,
        _add_task,
        _add_skills,
        _add_read,
        _add_prompt,
        _add_inspect,
        _add_install,
        _add_uninstall,
        _add_config,
        _add_gateway,
        _add_audit,
        _add_pins,
    ):
        add(commands)
    return parser


# -- run --------------------------------------------------------------------------------


def _add_run(commands: Commands) -> None:
    run = commands.add_parser(
        "run",
        help="run a server from FILE[:OBJECT] or MODULE[:OBJECT]",
        description="Run a server from FILE[:OBJECT] or MODULE[:OBJECT]. Over http, besides the MCP "
        "endpoint /mcp (and HTTP+SSE at /sse), two health probes answer GET without authentication: "
        '/healthz (alive: 200 {"status":"ok"}) and /readyz (ready: 200, or 503 while draining after '
        "SIGTERM and while the Redis of --redis is down). Point a load balancer at /readyz; the "
        "Host check still applies (see docs/deployment.md, Health checks).",
    )
    run.add_argument("target", metavar="FILE[:OBJECT]|MODULE[:OBJECT]")
    run.add_argument("--transport", choices=["stdio", "http", "sse"], default="stdio")
    run.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback only)")
    run.add_argument("--port", type=int, default=8000)
    run.add_argument(
        "--workers",
        type=int,
        default=1,
        metavar="N",
        help="http: serve the port with N processes (N > 1 needs --redis or --stateless)",
    )
    run.add_argument(
        "--redis",
        metavar="URL",
        help="http: share sessions, streams and notifications on Redis (sets MCPKIT_REDIS_URL)",
    )
    run.add_argument(
        "--stateless", action="store_true", help="http: legacy era without sessions (no shared state needed)"
    )
    run.set_defaults(func=_run)


def _add_serve(commands: Commands) -> None:
    serve = commands.add_parser(
        "serve",
        help=f"run a reference server: {_server_names()}",
        usage="mcpkit serve NAME [ARGS...]",
        description=f"Run one of mcpkit's reference servers ({_server_names()}), over stdio unless its "
        "ARGS say otherwise; the same as python -m mcpkit.servers.NAME ARGS... Everything after NAME "
        "is the server's own command line: mcpkit serve NAME --help shows it. Servers with more "
        "dependencies than mcpkit have an extra: pip install 'mcpkit[servers-NAME]'.",
    )
    serve.add_argument("name", metavar="NAME", help=f"the server: {_server_names()}")
    serve.set_defaults(func=_lazy("_servers", "cmd_serve"), server_args=[])


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def parse(parser: argparse.ArgumentParser, head: list[str]) -> argparse.Namespace:
    """Parse, letting options and positionals mix (``call s.py add a=1 --json b=2``)."""
    names: list[str] = []
    current = parser
    rest = head
    while rest and not rest[0].startswith("-"):
        subs = _subparsers(current)
        if rest[0] not in subs:
            break
        names.append(rest[0])
        current, rest = subs[rest[0]], rest[1:]
    if not names or _subparsers(current):
        return parser.parse_args(head)  # help, version, errors, or a missing sub-command
    dashed = None
    if names[0] == "task":
        rest, dashed = _take_dashed_task_id(current, rest)
    args = current.parse_intermixed_args(rest)
    args.cmd = " ".join(names)
    if dashed is not None:
        args.words.insert(1, dashed)  # TARGET, then TASK_ID
    return args


def _take_dashed_task_id(parser: argparse.ArgumentParser, words: list[str]) -> tuple[list[str], str | None]:
    """``mcpkit task ACTION TARGET TASK_ID``: a TASK_ID that starts with '-' (mcpkit's ids never
    do; another server's may) would be read as an option. The word right after TARGET is taken
    out as the id when it is not one of the command's options (exactly, or as ``-vv``); an id
    that starts with ``--`` must follow ``--``. The words left, and the id taken (or None).
    """
    options = parser._option_string_actions
    positionals = 0
    i = 0
    while i < len(words):
        word = words[i]
        if len(word) < 2 or not word.startswith("-"):
            positionals += 1
            if positionals > 1:
                break  # TASK_ID was given plainly
            i += 1
            continue
        if positionals == 1 and not word.startswith("--") and not _short_options(word, options):
            return words[:i] + words[i + 1 :], word
        action = options.get(word.split("=", 1)[0])
        # An option's value is its own word unless attached (--timeout=5): skip it.
        i += 2 if action is not None and action.nargs is None and "=" not in word else 1
    return words, None


def _short_options(word: str, options: dict[str, argparse.Action]) -> bool:
    """Whether ``word`` is an option (``-v``) or a cluster of flags (``-vh``)."""
    if word in options:
        return True
    flags = word[1:]
    return all(f"-{c}" in options and options[f"-{c}"].nargs == 0 for c in flags)


def split_command(argv: Sequence[str]) -> tuple[list[str], list[str] | None]:
    """Everything before the first ``--``, and the command after it (None: no ``--``)."""
    argv = list(argv)
    if "--" not in argv:
        return argv, None
    cut = argv.index("--")
    return argv[:cut], argv[cut + 1 :]


def split_server_args(argv: Sequence[str]) -> tuple[list[str], list[str] | None]:
    """The words for mcpkit's parser, and a reference server's own arguments (None: none).

    ``mcpkit serve NAME ARGS...`` and ``mcpkit install ... --server NAME ARGS...``
    pass ARGS untouched to the server (``--help``, ``--read-only``, ``--`` included):
    they are cut here, before the parser would read them as mcpkit's options.
    """
    argv = list(argv)
    if argv[:1] == ["serve"]:
        if len(argv) >= 2 and not argv[1].startswith("-"):
            return argv[:2], argv[2:]
        return argv, None
    if argv[:1] == ["install"]:
        end = argv.index("--") if "--" in argv else len(argv)
        for i, word in enumerate(argv[:end]):
            if word.startswith("--server="):
                return argv[: i + 1], argv[i + 1 :]
            if word == "--server" and i + 1 < end:
                return argv[: i + 2], argv[i + 2 :]
    return argv, None


def main(argv: Sequence[str] | None = None) -> int:
    words, server_args = split_server_args(sys.argv[1:] if argv is None else argv)
    head, command = split_command(words)
    json_mode = "--json" in head
    console = Console(json_mode=json_mode)
    try:
        args = parse(build_parser(), head)
        args.command_argv = command
        if server_args is not None:
            args.server_args = server_args
        console = Console(json_mode=bool(getattr(args, "json", False)), prog=f"mcpkit {args.cmd}")
        return int(args.func(args, console))
    except CLIError as exc:
        console.error(exc)
        return exc.code
    except KeyboardInterrupt:
        console.info("interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`mcpkit list ... | head`): stop quietly.
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
