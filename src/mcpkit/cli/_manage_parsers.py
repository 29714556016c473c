"""The parsers of the commands that manage servers: install, uninstall, config, gateway,
audit-servers, pins.
"""

from __future__ import annotations

import argparse

from ._commands import (
    Commands,
    _add_env,
    _add_header,
    _add_json,
    _add_words,
    _lazy,
    _no_command,
    _Parser,
    _server_names,
)
from ._gateway_auth import add_auth_options

HOSTS = ["claude-desktop", "claude-code", "cursor", "vscode"]


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
        "put to the client as an elicitation). Over HTTP, --auth-* options make it an OAuth "
        "protected resource (see below).",
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
    add_auth_options(gateway)
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
