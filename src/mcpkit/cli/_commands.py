"""The parts of the ``mcpkit`` parser its command groups share: the parser class (usage
errors become :class:`CLIError`), the lazy handlers, and the options several commands take.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import NoReturn, TypeAlias

from ._output import EXIT_USAGE, CLIError, Console

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


#: What ``add_subparsers`` returns: each command adds its own parser to it.
Commands: TypeAlias = "argparse._SubParsersAction[_Parser]"


def _server_names() -> str:
    from ..servers import SERVERS

    return ", ".join(SERVERS)


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
