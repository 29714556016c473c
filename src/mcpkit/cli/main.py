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
from collections.abc import Callable, Sequence
from typing import NoReturn, TypeAlias

from .._version import __version__
from ._output import EXIT_ERROR, EXIT_INTERRUPTED, EXIT_USAGE, CLIError, Console

__all__ = ["build_parser", "main"]

Handler = Callable[[argparse.Namespace, Console], int]


class UsageError(CLIError):
    hint_label = "usage"

    def __init__(self, message: str, usage: str, prog: str) -> None:
        super().__init__(message, EXIT_USAGE, hint=usage.strip().removeprefix("usage: "))
        self.prog = prog


class _Parser(argparse.ArgumentParser):
    """Usage errors become :class:`CLIError` (exit 2), reported like every other error."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message, self.format_usage(), self.prog)


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


def _lazy(module: str, name: str) -> Handler:
    def handler(args: argparse.Namespace, console: Console) -> int:
        import importlib

        func: Handler = getattr(importlib.import_module(f"mcpkit.cli.{module}"), name)
        return func(args, console)

    return handler


def _no_command(args: argparse.Namespace, console: Console) -> int:
    if args.command_argv is not None:
        raise CLIError(f"mcpkit {args.cmd} takes no command after --", EXIT_USAGE)
    return _lazy(*_NO_COMMAND[args.cmd])(args, console)


_NO_COMMAND = {
    "uninstall": ("_manage", "cmd_uninstall"),
    "config list": ("_manage", "cmd_config_list"),
    "config check": ("_manage", "cmd_config_check"),
    "gateway": ("_manage", "cmd_gateway"),
    "audit-servers": ("_audit", "cmd_audit_servers"),
    "pins list": ("_audit", "cmd_pins_list"),
    "pins accept": ("_audit", "cmd_pins_accept"),
    "pins forget": ("_audit", "cmd_pins_forget"),
}


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


HOSTS = ["claude-desktop", "claude-code", "cursor", "vscode"]

#: What ``add_subparsers`` returns: each command adds its own parser to it.
Commands: TypeAlias = "argparse._SubParsersAction[_Parser]"


def build_parser() -> argparse.ArgumentParser:
    """The ``mcpkit`` parser: one sub-command per ``_add_*`` function below."""
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


# -- options several commands share ---------------------------------------------------


def _add_json(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="machine-readable JSON on stdout")


def _add_header(p: argparse.ArgumentParser, help: str) -> None:
    p.add_argument("-H", "--header", action="append", default=[], metavar="'NAME: VALUE'", help=help)


def _add_env(p: argparse.ArgumentParser, help: str) -> None:
    p.add_argument("-e", "--env", action="append", default=[], metavar="KEY=VALUE", help=help)


def _client_options(p: argparse.ArgumentParser, *, one_shot: bool = True, stdio: bool = True) -> None:
    """The options of a command that connects to TARGET.

    Where to find it and how to reach it (``--config``, ``--protocol``, ``-H``,
    ``-e``); and, for the one-shot commands (list, call, read, prompt, task),
    ``--transport``, ``--timeout``, ``-v`` and ``--json`` too. The inspector
    chooses those on its page instead. Without ``stdio`` (the task commands,
    which reach servers by URL only) there is no ``-e``.
    """
    p.add_argument(
        "--config", metavar="FILE", help="host config file to find NAME targets in (default ./.mcp.json)"
    )
    p.add_argument(
        "--protocol",
        metavar="VERSION",
        help="auto (default), legacy, modern, or a revision such as 2025-06-18",
    )
    _add_header(p, "HTTP header for URL targets (repeatable)")
    if stdio:
        _add_env(p, "environment for stdio servers (repeatable)")
    else:
        p.set_defaults(env=[])
    if not one_shot:
        return
    p.add_argument(
        "--transport",
        choices=["auto", "http", "sse"],
        default="auto",
        help="for URLs: Streamable HTTP with fallback (auto), only Streamable HTTP, or only HTTP+SSE",
    )
    p.add_argument(
        "--timeout",
        type=float,
        metavar="SECONDS",
        help="connect and request timeout (default: the config entry's timeout, else 30)",
    )
    p.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="show the server's stderr and its log messages (all levels, both eras)",
    )
    _add_json(p)


def _add_no_input(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--no-input",
        action="store_true",
        help="never ask: declare neither elicitation nor roots to the server (for scripts; "
        "without it, a terminal on stdin answers the server's questions, and roots are this directory)",
    )


def _add_words(p: argparse.ArgumentParser, metavar: str | None = None) -> None:
    """TARGET and what follows it; parsed by the command itself (see :func:`parse`)."""
    p.add_argument("words", nargs="*", metavar=metavar, help=argparse.SUPPRESS)


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


def _server_names() -> str:
    from ..servers import SERVERS

    return ", ".join(SERVERS)


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


# -- using a server: list, call, read, prompt, inspect ------------------------------------


def _add_list(commands: Commands) -> None:
    lst = commands.add_parser(
        "list",
        help="list a server's tools, resources, templates and prompts",
        usage="mcpkit list TARGET [tools|resources|templates|prompts] [options]",
    )
    _add_words(lst, metavar="TARGET [SECTION]")
    _client_options(lst)
    lst.set_defaults(func=_lazy("_use", "cmd_list"))


def _add_call(commands: Commands) -> None:
    call = commands.add_parser(
        "call",
        help="call a tool",
        usage="mcpkit call TARGET TOOL [key=value ...] [--json-args '{...}'] [options]",
        description="Call TOOL. key=value values are JSON when they parse as JSON (n=3, ok=true, "
        "tags='[\"a\"]'), else strings (a property the tool declares as a string stays a string). "
        "A tool result with isError exits with 4 and its text on stderr. When the tool asks the user "
        "for input (elicitation), a terminal on stdin answers it with a form; the current directory is "
        "offered as the client's roots. When the server runs the call as a task, its id is printed on "
        "stderr at once, then its status as it changes (in place on a terminal); the task's questions "
        "are answered with the same form; Ctrl+C cancels the task (tasks/cancel) before exiting. "
        "--timeout bounds each request, not the task: a task takes as long as it takes.",
    )
    _add_words(call)
    call.add_argument(
        "--json-args", metavar="JSON", help="all arguments as one JSON object (or @FILE, or - for stdin)"
    )
    _add_no_input(call)
    _client_options(call)
    call.set_defaults(func=_lazy("_use", "cmd_call"))


_TASK_TARGETS = (
    "TARGET is the server's http(s):// URL (or the NAME of such a server in --config): a task lives "
    "in the server process that made it (or in the Redis its workers share), so it outlives the "
    "connection that started it, but a stdio server's tasks end with the process, which no other "
    "command can reach. Tasks are the 2026-07-28 era's (the io.modelcontextprotocol/tasks extension) "
    "and, experimental, 2025-11-25's (--protocol 2025-11-25). A TASK_ID that starts with '-' is taken "
    "as the id right after TARGET, or may follow --: mcpkit task get URL [options] -- TASK_ID."
)


def _add_task(commands: Commands) -> None:
    task = commands.add_parser(
        "task",
        help="check on, wait for or cancel a task by its id (HTTP servers)",
        description="A tool call the server runs as a task can be looked at, waited for and cancelled "
        "later, from any process, with the task's id (mcpkit call prints it). " + _TASK_TARGETS,
    )
    actions = task.add_subparsers(dest="task_cmd", metavar="ACTION", required=True, parser_class=_Parser)
    get = actions.add_parser(
        "get",
        help="show a task: status, status message; its result or error once ended",
        usage="mcpkit task get TARGET TASK_ID [options]",
        description="Show a task (tasks/get): its status and status message; once it has ended, its "
        "result (completed) or error (failed); while it waits for input, its questions. Exits 0 "
        "whatever the status; --json prints the task as the server sent it. " + _TASK_TARGETS,
    )
    cancel = actions.add_parser(
        "cancel",
        help="cancel a task",
        usage="mcpkit task cancel TARGET TASK_ID [options]",
        description="Cancel a task (tasks/cancel) and show its status after. Cancellation is "
        "cooperative: the task ends cancelled, or completed or failed if it finished first; "
        "cancelling an ended task changes nothing. " + _TASK_TARGETS,
    )
    wait = actions.add_parser(
        "wait",
        help="follow a task to its end and print its result, answering its questions",
        usage="mcpkit task wait TARGET TASK_ID [options]",
        description="Follow a task to its end, showing its status as it changes, and print its result "
        "as mcpkit call does (same output, same exit codes). The task's questions are answered with "
        "a form when stdin is a terminal. Ctrl+C stops waiting and leaves the task running (mcpkit "
        "task cancel stops it). " + _TASK_TARGETS,
    )
    for action, name in ((get, "get"), (cancel, "cancel"), (wait, "wait")):
        _add_words(action)
        if action is wait:
            _add_no_input(action)
        _client_options(action, stdio=False)
        action.set_defaults(func=_lazy("_tasks", f"cmd_task_{name}"))


def _add_skills(commands: Commands) -> None:
    skills = commands.add_parser(
        "skills",
        help="list a server's skills, show one, read or export its files (verified)",
        description="The skills a server serves (the io.modelcontextprotocol/skills extension). Listing "
        "and showing a skill fetch none of its files; --file and --out fetch them, and print or write "
        "a file only once its size, sha256 digest and (SKILL.md) frontmatter match the server's entry: "
        "a file that does not is refused (exit 4) and nothing of it is printed or written.",
    )
    actions = skills.add_subparsers(dest="skills_cmd", metavar="ACTION", required=True, parser_class=_Parser)
    lst = actions.add_parser(
        "list",
        help="list the skills: name, URI, files, description",
        usage="mcpkit skills list TARGET [options]",
        description="List the server's skills (skills/list, every page). --json prints the entries as "
        "the server sent them (frontmatter, and each file's URI, size and digest).",
    )
    _add_words(lst)
    _client_options(lst)
    lst.set_defaults(func=_lazy("_skills", "cmd_skills_list"))
    get = actions.add_parser(
        "get",
        help="show a skill's entry, print one of its files, or export it to a directory",
        usage="mcpkit skills get TARGET NAME [--file PATH | --out DIR [--force]] [options]\n"
        "       mcpkit skills get TARGET --all --out DIR [--force] [options]",
        description="NAME is a skill's name, its path (acme/billing/refunds) or the URI of its SKILL.md. "
        "Without --file or --out: its entry (frontmatter; each file's path, size and digest). --file "
        "PATH prints that file (relative to the skill, e.g. SKILL.md or references/FORMS.md), verified. "
        "--out DIR writes the skill, every file verified, to DIR/NAME/ (a local skills directory); "
        "--all --out DIR every listed skill. A skill is written whole or not at all; an existing "
        "DIR/NAME is replaced only with --force.",
    )
    _add_words(get)
    get.add_argument("--file", metavar="PATH", help="print this file of the skill, verified")
    get.add_argument("--out", metavar="DIR", help="export the skill (verified) to DIR/NAME/")
    get.add_argument("--all", action="store_true", help="with --out: every skill the server lists")
    get.add_argument("--force", action="store_true", help="with --out: replace an existing DIR/NAME")
    _client_options(get)
    get.set_defaults(func=_lazy("_skills", "cmd_skills_get"))


def _add_read(commands: Commands) -> None:
    read = commands.add_parser("read", help="read a resource", usage="mcpkit read TARGET URI [options]")
    _add_words(read)
    _add_no_input(read)
    _client_options(read)
    read.set_defaults(func=_lazy("_use", "cmd_read"))


def _add_prompt(commands: Commands) -> None:
    prompt = commands.add_parser(
        "prompt", help="get a prompt", usage="mcpkit prompt TARGET NAME [key=value ...] [options]"
    )
    _add_words(prompt)
    _add_no_input(prompt)
    _client_options(prompt)
    prompt.set_defaults(func=_lazy("_use", "cmd_prompt"))


def _add_inspect(commands: Commands) -> None:
    insp = commands.add_parser(
        "inspect",
        help="open the web inspector (optionally connected to TARGET)",
        usage="mcpkit inspect [TARGET | -- COMMAND ...] [options]",
    )
    _add_words(insp)
    _client_options(insp, one_shot=False)
    insp.add_argument("--host", default="127.0.0.1", help="loopback address to bind (default 127.0.0.1)")
    insp.add_argument("--port", type=int, default=0, help="port (default: any free port)")
    insp.add_argument("--no-browser", action="store_true", help="do not open a browser")
    insp.set_defaults(func=_lazy("_use", "cmd_inspect"))


# -- host config files: install, uninstall, config list/check -----------------------------


def _add_host(p: argparse.ArgumentParser) -> None:
    p.add_argument("host", choices=HOSTS, metavar="HOST", help=" | ".join(HOSTS))


def _add_install(commands: Commands) -> None:
    install = commands.add_parser(
        "install",
        help="add a server to a host's config file",
        usage="mcpkit install HOST (FILE.py[:OBJECT] | URL | -- COMMAND ...) --name NAME [options]\n"
        "       mcpkit install HOST [--name NAME] [options] --server SERVER [ARGS...]",
        description="Add a server to Claude Desktop, Claude Code, Cursor or VS Code. A FILE.py becomes "
        "`<this python> -m mcpkit run /absolute/FILE.py`; a reference server (--server) becomes "
        "`<this python> -m mcpkit serve SERVER ARGS...`, where an ARG naming an existing file or "
        "directory is written as an absolute path. Every other entry and key of the file is kept; "
        "the previous file is backed up next to it first.",
    )
    _add_host(install)
    _add_words(install)
    install.add_argument(
        "--name", help="the server's name in the host (required, except with --server: SERVER by default)"
    )
    install.add_argument(
        "--server",
        metavar="SERVER",
        help=f"a reference server ({_server_names()}); everything after SERVER is its ARGS (as for "
        "mcpkit serve), checked against its own options before anything is written, so put install's "
        "own options before --server",
    )
    _add_env(install, "environment (repeatable)")
    _add_header(install, "HTTP header for a URL")
    install.add_argument(
        "--path", metavar="CONFIG_FILE", help="write this file instead of the host's default"
    )
    install.add_argument(
        "--scope",
        choices=["project", "user"],
        help="project or user file (claude-code, vscode: project; cursor, claude-desktop: user)",
    )
    install.add_argument("--force", action="store_true", help="replace an existing entry of that name")
    _add_json(install)
    install.set_defaults(func=_lazy("_manage", "cmd_install"), server_args=[])


def _add_uninstall(commands: Commands) -> None:
    uninstall = commands.add_parser("uninstall", help="remove a server from a host's config file")
    _add_host(uninstall)
    uninstall.add_argument("--name", required=True)
    uninstall.add_argument("--path", metavar="CONFIG_FILE")
    uninstall.add_argument("--scope", choices=["project", "user"])
    _add_json(uninstall)
    uninstall.set_defaults(func=_no_command)


def _add_config(commands: Commands) -> None:
    config = commands.add_parser("config", help="list or check the servers of host config files")
    actions = config.add_subparsers(dest="config_cmd", metavar="ACTION", required=True, parser_class=_Parser)
    clist = actions.add_parser(
        "list",
        help="show the servers of a config file (secrets redacted)",
        description="Without FILE: every known host config file found here and in your home folder.",
    )
    clist.add_argument("file", nargs="?", metavar="FILE")
    _add_json(clist)
    clist.set_defaults(func=_no_command)
    check = actions.add_parser(
        "check",
        help="start each server, list its tools, report OK/FAILED",
        description="Exits 0 only when every (enabled) server answers.",
    )
    check.add_argument("file", nargs="?", metavar="FILE")
    check.add_argument(
        "--timeout", type=float, metavar="SECONDS", help="per server (default: its entry's timeout, else 30)"
    )
    _add_json(check)
    check.set_defaults(func=_no_command)


# -- gateway ------------------------------------------------------------------------------


def _add_gateway(commands: Commands) -> None:
    gateway = commands.add_parser(
        "gateway",
        help="serve every server of a config file as one MCP server",
        description="Tools appear as mcp__SERVER__TOOL. Rules use Claude Code's syntax (mcp__server, "
        "mcp__server__*, mcp__server__tool); deny wins over ask, ask over allow. Without --default, "
        "tools no rule mentions are allowed, unless --allow or --ask rules are given (then: ask, "
        "put to the client as an elicitation).",
    )
    gateway.add_argument("config", nargs="?", metavar="CONFIG", help="host config file (default ./.mcp.json)")
    gateway.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    gateway.add_argument("--host", default="127.0.0.1", help="address to bind for http (default loopback)")
    gateway.add_argument("--port", type=int, default=8000)
    for rule in ("--allow", "--deny", "--ask"):
        gateway.add_argument(rule, action="append", default=[], metavar="RULE")
    gateway.add_argument("--default", choices=["allow", "ask", "deny"], help="for tools no rule mentions")
    gateway.add_argument(
        "--settings", metavar="FILE", help="also take rules from a Claude Code settings.json"
    )
    gateway.add_argument("--audit", metavar="FILE", help="append a JSON line per tool call to FILE")
    gateway.add_argument(
        "--audit-arguments", action="store_true", help="record argument values (redacted otherwise)"
    )
    gateway.add_argument(
        "--pins",
        metavar="FILE",
        help="approved tool definitions (default: a file per config under ~/.local/state/mcpkit/pins)",
    )
    gateway.add_argument(
        "--no-pins", action="store_true", help="do not pin tool definitions (a changed tool is not held back)"
    )
    gateway.add_argument("--name", default="mcpkit-gateway", help="the gateway's server name")
    gateway.add_argument(
        "--timeout", type=float, default=30.0, metavar="SECONDS", help="backend connect timeout"
    )
    gateway.set_defaults(func=_no_command)


# -- audit-servers, pins ----------------------------------------------------------------

_SEVERITIES = ["info", "low", "medium", "high"]


def _add_pins_file(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--pins", metavar="FILE", help="the pins file (default: the one mcpkit gateway uses for CONFIG)"
    )


def _add_audit(commands: Commands) -> None:
    audit = commands.add_parser(
        "audit-servers",
        help="connect to every server of a config and report risky tools and launch commands",
        description="Findings, one per line with a severity: hidden instructions and invisible characters "
        "in tool names, descriptions and schemas, descriptions that address the model about other "
        "servers' tools, definitions changed since they were approved (pinned), tool names several "
        "servers share, and servers run from unpinned package versions. Exit 1 when a finding is at or "
        "above --fail-on.",
    )
    audit.add_argument("config", nargs="?", metavar="CONFIG", help="host config file (default ./.mcp.json)")
    audit.add_argument(
        "--fail-on",
        choices=[*_SEVERITIES, "none"],
        default="high",
        help="exit 1 from this severity (default high)",
    )
    audit.add_argument(
        "--min-severity", choices=_SEVERITIES, default="info", help="print findings from this severity"
    )
    audit.add_argument(
        "--offline", action="store_true", help="check the launch commands only, connect to nothing"
    )
    audit.add_argument(
        "-v", "--verbose", action="store_true", help="print each finding's details (diffs, excerpts)"
    )
    audit.add_argument(
        "--timeout", type=float, default=30.0, metavar="SECONDS", help="connect timeout per server"
    )
    _add_pins_file(audit)
    _add_json(audit)
    audit.set_defaults(func=_no_command)


def _add_pins(commands: Commands) -> None:
    pins = commands.add_parser(
        "pins",
        help="list, approve or forget the pinned tool definitions of a config",
        description="A tool whose definition changed since it was approved is held back by the host and "
        "the gateway until approved again here.",
    )
    actions = pins.add_subparsers(dest="pins_cmd", metavar="ACTION", required=True, parser_class=_Parser)
    plist = actions.add_parser("list", help="show the approved definitions (and changes waiting)")
    plist.add_argument("config", nargs="?", metavar="CONFIG", help="host config file (default ./.mcp.json)")
    plist.add_argument("--server", help="only this server's pins")
    _add_pins_file(plist)
    _add_json(plist)
    plist.set_defaults(func=_no_command)
    accept = actions.add_parser(
        "accept",
        help="approve a tool's changed definition",
        description="Approves the changed definition the host or gateway saw (shown as a diff); a TOOL "
        "with no change waiting, or a SERVER with none, is approved as the server lists it now.",
    )
    accept.add_argument("config", metavar="CONFIG", help="host config file")
    accept.add_argument("server", metavar="SERVER")
    accept.add_argument(
        "tools",
        nargs="*",
        metavar="TOOL",
        help="tools as the server names them (default: every change waiting)",
    )
    accept.add_argument("--timeout", type=float, default=30.0, metavar="SECONDS", help="connect timeout")
    _add_pins_file(accept)
    _add_json(accept)
    accept.set_defaults(func=_no_command)
    forget = actions.add_parser("forget", help="drop the pins of a server (or of one tool)")
    forget.add_argument("config", metavar="CONFIG", help="host config file")
    forget.add_argument("server", metavar="SERVER")
    forget.add_argument("tool", nargs="?", metavar="TOOL")
    _add_pins_file(forget)
    _add_json(forget)
    forget.set_defaults(func=_no_command)


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
