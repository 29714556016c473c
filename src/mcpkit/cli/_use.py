"""Commands that use one server: ``list``, ``call``, ``read``, ``prompt``, ``inspect``."""

from __future__ import annotations

import argparse
import asyncio
import base64
import binascii
import difflib
import inspect as pyinspect
import json
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec

from ..transports.loop import run as run_loop
from ._connect import connected, request_error, server_summary
from ._output import EXIT_ERROR, EXIT_OK, EXIT_PROTOCOL, EXIT_USAGE, CLIError, Console, Spinner
from ._target import (
    Target,
    apply_options,
    json_args,
    parse_env,
    parse_headers,
    parse_pairs,
    protocol_arg,
    resolve_target,
)

if TYPE_CHECKING:
    from ..client import Client
    from ..client.dispatch import RootsProvider
    from ..protocol import types as t
    from ._prompt_user import TerminalAsker

__all__ = ["cmd_call", "cmd_inspect", "cmd_list", "cmd_prompt", "cmd_read"]

T = TypeVar("T")

SECTIONS = ("tools", "resources", "templates", "prompts")
_SECTION_ALIASES = {
    "tool": "tools",
    "resource": "resources",
    "template": "templates",
    "resource-templates": "templates",
    "resource_templates": "templates",
    "prompt": "prompts",
}
_JSON_KEYS = {
    "tools": "tools",
    "resources": "resources",
    "templates": "resourceTemplates",
    "prompts": "prompts",
}
_CAPABILITY = {"tools": "tools", "resources": "resources", "templates": "resources", "prompts": "prompts"}
_TITLES = {
    "tools": "Tools",
    "resources": "Resources",
    "templates": "Resource templates",
    "prompts": "Prompts",
}
_SHORT_TYPES = {
    "string": "str",
    "integer": "int",
    "number": "num",
    "boolean": "bool",
    "array": "list",
    "object": "obj",
}


# -- shared ------------------------------------------------------------------------


def split_words(args: argparse.Namespace, needed: int, names: str) -> tuple[Target, list[str]]:
    """The target, and the positional words after it (at least ``needed`` of them)."""
    words: list[str] = list(args.words)
    command: list[str] | None = args.command_argv
    if command:
        word = None
    else:
        if not words:
            raise CLIError(f"missing TARGET {names}".rstrip(), EXIT_USAGE, hint=_usage_hint(args))
        word = words.pop(0)
    if len(words) < needed:
        hint = _usage_hint(args)
        if command and needed:
            hint = f"with a command after --, put {names} before the --: {hint}"
        raise CLIError(f"missing {names}", EXIT_USAGE, hint=hint)
    target = resolve_target(word, command, config=args.config)
    target = apply_options(
        target,
        env=parse_env(args.env),
        headers=parse_headers(args.header),
        protocol=protocol_arg(args.protocol) if args.protocol else None,
        transport=args.transport,
    )
    return target, words


def _usage_hint(args: argparse.Namespace) -> str:
    return {
        "list": "mcpkit list TARGET [tools|resources|templates|prompts]",
        "call": "mcpkit call TARGET TOOL [key=value ...]   or   mcpkit call TOOL [key=value ...] -- COMMAND",
        "read": "mcpkit read TARGET URI   or   mcpkit read URI -- COMMAND ...",
        "prompt": "mcpkit prompt TARGET NAME [key=value ...]   or   mcpkit prompt NAME ... -- COMMAND ...",
        "task get": "mcpkit task get URL TASK_ID",
        "task cancel": "mcpkit task cancel URL TASK_ID",
        "task wait": "mcpkit task wait URL TASK_ID",
    }.get(args.cmd, "")


async def _request(what: str, call: Callable[[], Awaitable[T]], args: argparse.Namespace | None = None) -> T:
    try:
        return await call()
    except CLIError:
        raise
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        err = request_error(exc, what)
        if args is not None:
            err.hint = _undeclared_hint(exc, args) or err.hint
        raise err from None


def _undeclared_hint(exc: BaseException, args: argparse.Namespace) -> str | None:
    """Why the client did not offer what the server asked for (-32021), and how to offer it."""
    from ..protocol.errors import MISSING_CLIENT_CAPABILITY, MCPError

    if not isinstance(exc, MCPError) or exc.code != MISSING_CLIENT_CAPABILITY:
        return None
    if getattr(args, "no_input", False):
        return (
            "--no-input declares neither elicitation nor roots: without it, a terminal on stdin answers "
            "the server's questions, and the current directory is offered as the roots"
        )
    if "elicitation" in str(exc):
        return (
            "the server asks the user for input: run the command with stdin on a terminal to answer it "
            "(stdin is not a terminal here)"
        )
    return None


def _asking(args: argparse.Namespace, console: Console) -> tuple[TerminalAsker | None, RootsProvider | None]:
    """What the client offers the server: with ``--no-input`` nothing (scripts keep
    today's behaviour); else the current directory as its roots (given when the
    server asks, roots/list) and, when stdin is a terminal, the user's answers to
    the server's questions (elicitation)."""
    if getattr(args, "no_input", True):
        return None, None
    from ._prompt_user import TerminalAsker, cwd_roots, question_stream, stdin_is_terminal

    out = question_stream(console) if stdin_is_terminal() else None
    return (TerminalAsker(console, out=out) if out is not None else None), cwd_roots


def _introduce(asker: TerminalAsker | None, client: Client, target: Target) -> None:
    """Tell the asker which server its questions come from."""
    if asker is not None:
        info = client.server_info
        asker.server = f"{info.name} ({target.label})" if info is not None else target.label


async def _user_paced(
    client: Client, asker: TerminalAsker | None, method: str, call: Callable[[], Awaitable[T]]
) -> T:
    """``call()`` within the client's timeout, except the time the user spends answering
    the server's questions: while one is open, the asker holds the deadline. (The
    per-request timer would count it: in the legacy era the request stays open
    while the server waits for the user's answer.)"""
    if asker is None:
        return await call()
    from ..protocol.errors import REQUEST_TIMEOUT, MCPError

    limit = client.timeout
    deadline = asyncio.timeout(limit)
    client.timeout = None
    try:
        async with deadline:
            asker.deadline = deadline
            return await call()
    except TimeoutError:
        if not deadline.expired():
            raise
        raise MCPError(REQUEST_TIMEOUT, f"Request {method} timed out after {limit:g}s") from None
    finally:
        client.timeout = limit
        asker.deadline = None


def _run(coro: Coroutine[Any, Any, int]) -> int:
    return run_loop(coro)


def _b64_size(data: str) -> int:
    try:
        return len(base64.b64decode(data, validate=False))
    except (binascii.Error, ValueError):
        return len(data) * 3 // 4


def render_block(console: Console, block: Any) -> str:
    """One content block as text for a terminal."""
    from ..protocol import types as t

    if isinstance(block, t.TextContent):
        return block.text
    if isinstance(block, t.ImageContent | t.AudioContent):
        kind = "image" if isinstance(block, t.ImageContent) else "audio"
        return console.style(f"[{kind}: {block.mime_type}, {_b64_size(block.data)} bytes]", "dim")
    if isinstance(block, t.ResourceLink):
        extra = f" ({block.mime_type})" if isinstance(block.mime_type, str) else ""
        return console.style(f"[resource link: {block.uri} — {block.name}{extra}]", "dim")
    if isinstance(block, t.EmbeddedResource):
        return render_contents(console, block.resource, header=True)
    return json.dumps(msgspec.to_builtins(block), ensure_ascii=False)


def render_contents(console: Console, contents: Any, *, header: bool) -> str:
    mime = contents.mime_type if isinstance(contents.mime_type, str) else None
    if isinstance(contents.text, str):
        if not header:
            return str(contents.text)
        label = f"[resource: {contents.uri}{', ' + mime if mime else ''}]"
        return f"{console.style(label, 'dim')}\n{contents.text}"
    size = _b64_size(contents.blob) if isinstance(contents.blob, str) else 0
    return console.style(
        f"[binary resource {contents.uri}: {mime or 'no MIME type'}, {size} bytes; "
        "--json shows it base64-encoded]",
        "dim",
    )


# -- list --------------------------------------------------------------------------


def cmd_list(args: argparse.Namespace, console: Console) -> int:
    target, words = split_words(args, 0, "")
    section: str | None = None
    if words:
        section = _SECTION_ALIASES.get(words[0], words[0])
        if section not in SECTIONS or len(words) > 1:
            raise CLIError(
                f"unknown section {' '.join(words)!r}", EXIT_USAGE, hint=f"choose from {', '.join(SECTIONS)}"
            )
    return _run(_list(target, section, args, console))


async def _list(target: Target, section: str | None, args: argparse.Namespace, console: Console) -> int:
    sections = [section] if section else list(SECTIONS)
    found: dict[str, list[Any] | None] = {}
    async with connected(target, console, timeout=args.timeout, verbose=args.verbose) as client:
        summary = server_summary(client)
        caps = client.server_capabilities
        fetch: dict[str, Callable[[], Awaitable[list[Any]]]] = {
            "tools": client.list_tools,
            "resources": client.list_resources,
            "templates": client.list_resource_templates,
            "prompts": client.list_prompts,
        }
        async with Spinner(console, f"listing {', '.join(sections)}"):
            for name in sections:
                supported = caps is None or getattr(caps, _CAPABILITY[name]) is not msgspec.UNSET
                if section is None and not supported:
                    found[name] = None
                    continue
                found[name] = await _request(f"{name} list", fetch[name])
    if console.json_mode:
        out: dict[str, Any] = {**summary}
        for name in sections:
            out[_JSON_KEYS[name]] = [msgspec.to_builtins(item) for item in found[name] or []]
        console.emit_json(out)
        return EXIT_OK
    overview = section is None
    if overview:
        info = client.server_info
        who = f"{info.name} {info.version}" if info is not None else target.label
        console.print(
            console.style(who, "bold")
            + console.style(f"  (protocol {summary['protocolVersion']}, {summary['era']})", "dim")
        )
    for name in sections:
        items = found[name]
        if overview:
            console.print()
            count = "not supported" if items is None else str(len(items))
            console.print(console.style(f"{_TITLES[name]} ({count})", "bold") if console.tty else f"{name}:")
        if items:
            _print_section(console, name, items)
    return EXIT_OK


def _print_section(console: Console, name: str, items: Sequence[Any]) -> None:
    rows: list[list[str]]
    if name == "tools":
        rows = [[tool.name, _tool_args(tool.input_schema), _text(tool.description)] for tool in items]
        console.table(rows, styles=[("cyan",), ("yellow",), ()])
    elif name == "resources":
        rows = [[r.uri, r.name, _text(r.mime_type), _text(r.description) or _text(r.title)] for r in items]
        console.table(rows, styles=[("cyan",), (), ("dim",), ()])
    elif name == "templates":
        rows = [
            [r.uri_template, r.name, _text(r.mime_type), _text(r.description) or _text(r.title)]
            for r in items
        ]
        console.table(rows, styles=[("cyan",), (), ("dim",), ()])
    else:
        rows = [[p.name, _prompt_args(p), _text(p.description)] for p in items]
        console.table(rows, styles=[("cyan",), ("yellow",), ()])


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _tool_args(schema: Any) -> str:
    if not isinstance(schema, dict):
        return ""
    props = schema.get("properties")
    if not isinstance(props, dict):
        return ""
    listed = schema.get("required")
    required: list[Any] = listed if isinstance(listed, list) else []
    parts = []
    for key, prop in props.items():
        kind = prop.get("type") if isinstance(prop, dict) else None
        if isinstance(kind, list):
            kind = "|".join(_SHORT_TYPES.get(str(k), str(k)) for k in kind if k != "null")
        elif isinstance(kind, str):
            kind = _SHORT_TYPES.get(kind, kind)
        optional = "" if key in required else "?"
        parts.append(f"{key}{optional}:{kind}" if kind else f"{key}{optional}")
    return ", ".join(parts)


def _prompt_args(prompt: Any) -> str:
    arguments = prompt.arguments if isinstance(prompt.arguments, list) else []
    return ", ".join(a.name + ("" if a.required is True else "?") for a in arguments)


# -- call --------------------------------------------------------------------------


def cmd_call(args: argparse.Namespace, console: Console) -> int:
    target, words = split_words(args, 1, "TOOL")
    tool, pairs = words[0], words[1:]
    parse_pairs(pairs, json_values=False)  # malformed words are reported before connecting
    base = json_args(args.json_args)
    return _run(_call(target, tool, base, pairs, args, console))


async def _call(
    target: Target,
    name: str,
    base: dict[str, Any],
    pairs: list[str],
    args: argparse.Namespace,
    console: Console,
) -> int:
    from ..protocol import types as t

    asker, roots = _asking(args, console)
    async with connected(
        target, console, timeout=args.timeout, verbose=args.verbose, elicitation=asker, roots=roots
    ) as client:
        _introduce(asker, client, target)
        tools: list[t.Tool] = []
        try:
            tools = await client.list_tools()
        except Exception:
            tools = []  # schema hints only; the call itself decides
        schema = next((tool.input_schema for tool in tools if tool.name == name), None)
        arguments = {**base, **parse_pairs(pairs, json_values=True, schema=schema)}
        async with Spinner(console, f"calling {name}") as spinner:
            from ._tasks import TaskLine, follow, start_call

            async def progress(done: float, total: float | None, message: str | None) -> None:
                shown = f"{done:g}/{total:g}" if total else f"{done:g}"
                spinner.update(f"calling {name}: {shown}" + (f" {message}" if message else ""))

            line = TaskLine(console, spinner, f"calling {name}", target)
            try:
                # The user's time is held off the deadline until the server answers; a task
                # then takes as long as it takes (each of its requests bounded by --timeout).
                answer = await _user_paced(
                    client,
                    asker,
                    "tools/call",
                    lambda: start_call(
                        client,
                        name,
                        arguments,
                        line,
                        timeout=None if asker else args.timeout,
                        progress=progress,
                    ),
                )
                result = (
                    answer
                    if isinstance(answer, t.CallToolResult)
                    else await follow(answer, cancel_on_exit=True)
                )
            except CLIError:
                raise
            except Exception as exc:
                err = request_error(exc, f"tool {name}")
                err.hint = _undeclared_hint(exc, args) or err.hint
                known = [tool.name for tool in tools]
                if tools and name not in known:
                    close = difflib.get_close_matches(name, known, n=3)
                    err.hint = (
                        f"did you mean {' or '.join(close)}?" if close else f"tools: {', '.join(known)}"
                    )
                raise err from None
    return show_tool_result(console, f"tool {name}", result)


def show_tool_result(console: Console, what: str, result: t.CallToolResult) -> int:
    """A tool's result on stdout (as JSON with ``--json``); ``isError`` exits with 4, its text on stderr."""
    from ..protocol import types as t

    if console.json_mode:
        console.emit_json(msgspec.to_builtins(result))
    if result.is_error is True:
        text = "\n".join(b.text for b in result.content if isinstance(b, t.TextContent)).strip()
        err = CLIError(f"{what} reported an error: {text or '(no message)'}", EXIT_PROTOCOL)
        err.result_written = console.json_mode
        raise err
    if not console.json_mode:
        for text in result_texts(console, result):
            console.print(text)
    return EXIT_OK


def result_texts(console: Console, result: t.CallToolResult) -> list[str]:
    """A tool result's content blocks as text (its structured content when it has no text)."""
    from ..protocol import types as t

    shown = [render_block(console, block) for block in result.content]
    if not any(isinstance(b, t.TextContent) for b in result.content) and (
        result.structured_content is not msgspec.UNSET
    ):
        shown.append(json.dumps(result.structured_content, indent=2, ensure_ascii=False))
    return shown


# -- read --------------------------------------------------------------------------


def cmd_read(args: argparse.Namespace, console: Console) -> int:
    target, words = split_words(args, 1, "URI")
    if len(words) > 1:
        raise CLIError(f"unexpected arguments: {' '.join(words[1:])}", EXIT_USAGE)
    return _run(_read(target, words[0], args, console))


async def _read(target: Target, uri: str, args: argparse.Namespace, console: Console) -> int:
    asker, roots = _asking(args, console)
    async with (
        connected(
            target, console, timeout=args.timeout, verbose=args.verbose, elicitation=asker, roots=roots
        ) as client,
        Spinner(console, f"reading {uri}"),
    ):
        _introduce(asker, client, target)
        result = await _request(
            f"read {uri}",
            lambda: _user_paced(client, asker, "resources/read", lambda: client.read_resource(uri)),
            args,
        )
    if console.json_mode:
        console.emit_json(msgspec.to_builtins(result))
        return EXIT_OK
    many = len(result.contents) > 1
    for contents in result.contents:
        console.print(render_contents(console, contents, header=many))
    return EXIT_OK


# -- prompt ------------------------------------------------------------------------


def cmd_prompt(args: argparse.Namespace, console: Console) -> int:
    target, words = split_words(args, 1, "NAME")
    name, pairs = words[0], words[1:]
    arguments = parse_pairs(pairs, json_values=False)
    return _run(_prompt(target, name, arguments, args, console))


async def _prompt(
    target: Target, name: str, arguments: dict[str, Any], args: argparse.Namespace, console: Console
) -> int:
    asker, roots = _asking(args, console)
    async with (
        connected(
            target, console, timeout=args.timeout, verbose=args.verbose, elicitation=asker, roots=roots
        ) as client,
        Spinner(console, f"getting prompt {name}"),
    ):
        _introduce(asker, client, target)
        result = await _request(
            f"prompt {name}",
            lambda: _user_paced(client, asker, "prompts/get", lambda: client.get_prompt(name, arguments)),
            args,
        )
    if console.json_mode:
        console.emit_json(msgspec.to_builtins(result))
        return EXIT_OK
    if isinstance(result.description, str) and result.description:
        console.print(console.style(result.description, "dim"))
    for i, message in enumerate(result.messages):
        if i or isinstance(result.description, str):
            console.print()
        console.print(console.style(f"{message.role}:", "bold", "magenta"))
        console.print(render_block(console, message.content))
    return EXIT_OK


# -- inspect -----------------------------------------------------------------------


def cmd_inspect(args: argparse.Namespace, console: Console) -> int:
    target: Target | None = None
    words = list(args.words)
    if len(words) > 1:
        raise CLIError(f"unexpected arguments: {' '.join(words[1:])}", EXIT_USAGE)
    if words or args.command_argv:
        target = resolve_target(words[0] if words else None, args.command_argv, config=args.config)
        target = apply_options(
            target,
            env=parse_env(args.env),
            headers=parse_headers(args.header),
            protocol=protocol_arg(args.protocol) if args.protocol else None,
        )
    elif args.env or args.header:
        raise CLIError("--env and --header need a TARGET", EXIT_USAGE)
    try:
        from ..inspector import run_inspector
    except ImportError as exc:
        raise CLIError(
            f"the inspector is not available: {exc}", EXIT_ERROR, hint="pip install 'mcpkit[http]'"
        ) from None
    options: dict[str, Any] = {
        "host": args.host,
        "port": args.port,
        "open_browser": not args.no_browser,
        "protocol": target.protocol if target else (args.protocol or "auto"),
        "headers": (target.headers or None) if target else None,
    }
    accepted = pyinspect.signature(run_inspector).parameters
    if target is not None and target.argv is not None:
        for key, value in (("env", target.env), ("cwd", target.cwd)):
            if not value:
                continue
            if key in accepted:
                options[key] = value
            else:
                console.warn(f"the inspector cannot pass {key} to the server yet; set it in the page")
    try:
        run_loop(run_inspector(target.client_target if target else None, **options))
    except ValueError as exc:
        raise CLIError(str(exc), EXIT_USAGE) from None
    except OSError as exc:
        raise CLIError(f"cannot start the inspector: {exc}", EXIT_ERROR) from None
    except KeyboardInterrupt:
        pass
    return EXIT_OK
