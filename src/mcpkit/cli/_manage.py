"""Commands about host configuration: ``install``, ``uninstall``, ``config``, ``gateway``."""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from ..transports.loop import run as run_loop
from ._connect import ProcessWatch, StderrTail, connect_error, make_client, request_error
from ._gateway_auth import gateway_auth
from ._hostfiles import HOSTS, ConfigDocument, HostKind, known_config_files
from ._output import (
    EXIT_CONNECT,
    EXIT_ERROR,
    EXIT_OK,
    EXIT_PROTOCOL,
    EXIT_USAGE,
    CLIError,
    Console,
    Spinner,
)
from ._target import (
    DEFAULT_CONFIG,
    DEFAULT_TIMEOUT,
    parse_entries,
    parse_env,
    parse_headers,
    python_file_command,
    read_config_data,
    server_entries,
    target_from_spec,
)

if TYPE_CHECKING:
    from ..host.config import ServerSpec
    from ..host.policy import Decision

__all__ = ["cmd_config_check", "cmd_config_list", "cmd_gateway", "cmd_install", "cmd_uninstall"]

_PY_OBJECT = re.compile(r"^(?P<file>.+\.py)(?::(?P<obj>[A-Za-z_][A-Za-z0-9_]*))?$")


# -- install / uninstall -------------------------------------------------------------


def _document(host: HostKind, args: argparse.Namespace) -> ConfigDocument:
    if args.path and args.scope:
        raise CLIError("give --path or --scope, not both", EXIT_USAGE)
    path = Path(args.path).expanduser() if args.path else host.path(args.scope)
    return ConfigDocument.load(path)


def install_entry(host: HostKind, words: list[str], args: argparse.Namespace) -> dict[str, Any]:
    """The entry to write for ``FILE.py[:OBJECT]``, a URL or a command."""
    env = parse_env(args.env)
    headers = parse_headers(args.header)
    if not words:
        raise CLIError("missing FILE.py, URL or COMMAND", EXIT_USAGE, hint=INSTALL_USAGE)
    first = words[0]
    if first.startswith(("http://", "https://")):
        if len(words) > 1:
            raise CLIError(f"unexpected arguments after the URL: {' '.join(words[1:])}", EXIT_USAGE)
        if env:
            raise CLIError("--env applies to stdio servers, not to a URL", EXIT_USAGE)
        return host.entry(url=first, headers=headers)
    if headers:
        raise CLIError("--header applies to a URL, not to a command", EXIT_USAGE)
    match = _PY_OBJECT.match(first)
    if match:
        file = Path(match["file"]).expanduser()
        if not file.is_file():
            raise CLIError(f"no such file: {file}", EXIT_USAGE)
        path = str(file.resolve())
        if len(words) == 1:
            # As the other commands start it: `python -m mcpkit run FILE[:OBJECT]` for a file
            # written with mcpkit (served with or without a __main__ block; this interpreter is
            # the one that has mcpkit), `python FILE` for one written with another SDK.
            argv = python_file_command(file, match["obj"])
            return host.entry(command=argv[0], args=argv[1:], env=env)
        if not match["obj"]:
            # A script with its own arguments runs as itself: `python FILE ARGS...`.
            return host.entry(command=sys.executable, args=[path, *words[1:]], env=env)
        raise CLIError("FILE.py:OBJECT takes no further arguments", EXIT_USAGE)
    return host.entry(command=first, args=words[1:], env=env)


INSTALL_USAGE = (
    "mcpkit install HOST FILE.py --name NAME   |   mcpkit install HOST --name NAME -- COMMAND ARGS...   |   "
    "mcpkit install HOST https://... --name NAME   |   mcpkit install HOST --server SERVER ARGS..."
)


def server_entry_for(host: HostKind, args: argparse.Namespace, console: Console) -> dict[str, Any]:
    """The entry for ``--server NAME ARGS...``: ``<this python> -m mcpkit serve NAME ARGS...``."""
    from ._servers import check_args, missing_packages, server_available, server_command

    if args.words or args.command_argv:
        raise CLIError(
            "give FILE.py, a URL, a command after -- or --server NAME, not several",
            EXIT_USAGE,
            hint=INSTALL_USAGE,
        )
    if args.header:
        raise CLIError("--header applies to a URL, not to a reference server", EXIT_USAGE)
    argv = server_command(args.server, args.server_args)
    if not server_available(args.server):
        raise CLIError(
            f"the {args.server} server is not part of this mcpkit installation",
            EXIT_ERROR,
            hint="upgrade mcpkit: pip install -U mcpkit",
        )
    check_args(args.server, args.server_args)
    missing = missing_packages(args.server)
    if missing:
        console.warn(
            f"the {args.server} server may need packages that are not installed ({', '.join(missing)}): "
            f"pip install 'mcpkit[servers-{args.server}]'"
        )
    return host.entry(command=argv[0], args=argv[1:], env=parse_env(args.env))


def cmd_install(args: argparse.Namespace, console: Console) -> int:
    host = HOSTS[args.host]
    words = list(args.words) + list(args.command_argv or [])
    if args.server is not None:
        entry = server_entry_for(host, args, console)
        args.name = args.name or args.server
    else:
        if args.name is None:
            raise CLIError("--name is required", EXIT_USAGE, hint=INSTALL_USAGE)
        if args.words and args.command_argv:
            raise CLIError("give FILE.py or a command after --, not both", EXIT_USAGE, hint=INSTALL_USAGE)
        entry = install_entry(host, words, args)
    doc = _document(host, args)
    servers = doc.servers(host) or {}
    previous = servers.get(args.name)
    result: dict[str, Any] = {
        "host": host.key,
        "path": str(doc.path),
        "name": args.name,
        "entry": entry,
        "backup": None,
        "created": not doc.existed,
        "changed": False,
    }
    if previous == entry:
        if console.json_mode:
            console.emit_json(result)
        else:
            console.info(f"{args.name!r} is already installed in {doc.path} as given; nothing to do")
        return EXIT_OK
    if previous is not None and not args.force:
        raise CLIError(
            f"{doc.path} already has a server named {args.name!r}",
            EXIT_ERROR,
            hint="pass --force to replace it, or choose another --name",
        )
    doc.set_server(host, args.name, entry)
    backup = doc.save()
    result.update(backup=str(backup) if backup else None, changed=True)
    if console.json_mode:
        console.emit_json(result)
        return EXIT_OK
    verb = "replaced" if previous is not None else "added"
    console.print(f"{verb} {console.style(args.name, 'bold')} in {doc.path} ({host.title})")
    if backup:
        console.info(f"  backup of the previous file: {backup}")
    if doc.comments_lost:
        console.warn(f"the comments in {doc.path} were not kept (they are in the backup)")
    console.info(f"  restart {host.title} (or reload its MCP servers) to pick it up")
    return EXIT_OK


def cmd_uninstall(args: argparse.Namespace, console: Console) -> int:
    host = HOSTS[args.host]
    doc = _document(host, args)
    if not doc.existed:
        raise CLIError(f"{doc.path} does not exist; nothing to remove", EXIT_ERROR)
    servers = doc.servers(host)
    if not servers or args.name not in servers:
        names = ", ".join(sorted(servers or {})) or "none"
        raise CLIError(f"no server named {args.name!r} in {doc.path} (servers: {names})", EXIT_ERROR)
    removed = doc.remove_server(host, args.name)
    backup = doc.save()
    if console.json_mode:
        console.emit_json(
            {
                "host": host.key,
                "path": str(doc.path),
                "name": args.name,
                "removed": removed,
                "backup": str(backup) if backup else None,
            }
        )
        return EXIT_OK
    console.print(f"removed {console.style(args.name, 'bold')} from {doc.path} ({host.title})")
    if backup:
        console.info(f"  backup of the previous file: {backup}")
    if doc.comments_lost:
        console.warn(f"the comments in {doc.path} were not kept (they are in the backup)")
    return EXIT_OK


# -- config list ---------------------------------------------------------------------


class _Placeholders(Mapping[str, str]):
    """Variables left as written: ``${NAME}`` stays ``${NAME}`` (nothing is read
    from the environment, so nothing secret is shown and nothing is missing)."""

    def __init__(self, prefix: str = "") -> None:
        self.prefix = prefix

    def __getitem__(self, key: str) -> str:
        return "${" + self.prefix + key + "}"

    def __contains__(self, key: object) -> bool:
        return True

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0

    def __bool__(self) -> bool:
        return True  # not "empty": every name has a value


_REFERENCE = re.compile(r"\$\{[^{}]*\}")
_AUTH_WORDS = re.compile(r"^\s*((bearer|basic|token)\s*)?$", re.IGNORECASE)
_SECRET_FLAG = re.compile(r"(token|secret|password|passwd|api[-_]?key|auth|credential)", re.IGNORECASE)
REDACTED = "<redacted>"


def _shown(value: str) -> str:
    """A value as ``config list`` shows it: kept when it is only variable
    references (``${TOKEN}``, ``Bearer ${TOKEN}``), else redacted."""
    if _REFERENCE.search(value) and _AUTH_WORDS.match(_REFERENCE.sub("", value)):
        return value
    return REDACTED


def _shown_args(args: tuple[str, ...]) -> list[str]:
    out: list[str] = []
    secret_next = False
    for arg in args:
        if secret_next:
            out.append(_shown(arg))
            secret_next = False
            continue
        flag, eq, value = arg.partition("=")
        if arg.startswith("-") and _SECRET_FLAG.search(flag):
            if eq:
                out.append(f"{flag}={_shown(value)}")
            else:
                out.append(arg)
                secret_next = True
            continue
        out.append(arg)
    return out


def describe_spec(spec: ServerSpec) -> dict[str, Any]:
    """A server entry for display, secrets redacted."""
    from ..host.config import redact_url

    out: dict[str, Any] = {"name": spec.name, "transport": spec.transport}
    if spec.transport == "stdio":
        out["command"] = spec.command
        out["args"] = _shown_args(spec.args)
        out["env"] = {k: _shown(v) for k, v in spec.env.items()}
        if spec.cwd:
            out["cwd"] = spec.cwd
    else:
        out["url"] = redact_url(spec.url or "")
        out["headers"] = {k: _shown(v) for k, v in spec.headers.items()}
    if spec.protocol != "auto":
        out["protocol"] = spec.protocol
    if spec.timeout is not None:
        out["timeout"] = spec.timeout
    out["disabled"] = spec.disabled
    return out


def _config_files(args: argparse.Namespace) -> tuple[list[tuple[str, Path]], bool]:
    """(label, path) pairs to look at, and whether they were named explicitly."""
    if args.file:
        return [(args.file, Path(args.file).expanduser())], True
    found = [(label, path) for label, path in known_config_files() if path.is_file()]
    if not found:
        looked = ", ".join(str(p) for _, p in known_config_files())
        raise CLIError("no host config files found", EXIT_ERROR, hint=f"looked for {looked}")
    return found, False


def _load_for_listing(path: Path) -> tuple[str, dict[str, ServerSpec]]:
    data = read_config_data(path)
    fmt, entries = server_entries(data, path)
    specs = parse_entries(data, fmt, entries, path, environ=_Placeholders(), inputs=_Placeholders("input:"))
    return fmt, specs


def cmd_config_list(args: argparse.Namespace, console: Console) -> int:
    files, explicit = _config_files(args)
    report: list[dict[str, Any]] = []
    code = EXIT_OK
    for label, path in files:
        item: dict[str, Any] = {"label": label, "path": str(path)}
        try:
            fmt, specs = _load_for_listing(path)
        except CLIError as exc:
            if not explicit and "no server list" in exc.message:
                continue  # e.g. a ~/.claude.json without user-scope servers
            if explicit:
                raise
            item["error"] = exc.message
            code = EXIT_ERROR
            report.append(item)
            continue
        item["format"] = fmt
        item["servers"] = [describe_spec(spec) for spec in specs.values()]
        report.append(item)
    if console.json_mode:
        console.emit_json({"files": report})
        return code
    for i, item in enumerate(report):
        if i:
            console.print()
        title = item["path"] if explicit else f"{item['label']}: {item['path']}"
        console.print(console.style(title, "bold"))
        if "error" in item:
            console.print("  " + console.style(f"error: {item['error']}", "red"))
            continue
        rows: list[list[str]] = []
        for server in item["servers"]:
            if server["transport"] == "stdio":
                where = " ".join([server["command"], *server["args"]])
                extra = ", ".join(f"{k}={v}" for k, v in server["env"].items())
                extra = f"env: {extra}" if extra else ""
            else:
                where = server["url"]
                extra = ", ".join(f"{k}: {v}" for k, v in server["headers"].items())
                extra = f"headers: {extra}" if extra else ""
            if server["disabled"]:
                extra = ("disabled; " + extra).rstrip("; ")
            rows.append([server["name"], server["transport"], where, extra])
        if rows:
            console.table(rows, styles=[("cyan",), ("dim",), (), ("dim",)])
        else:
            console.print("  (no servers)")
    return code


# -- config check --------------------------------------------------------------------


async def _check_one(spec: ServerSpec | CLIError | None, name: str, timeout: float | None) -> dict[str, Any]:
    started = time.perf_counter()
    result: dict[str, Any] = {"name": name, "ok": False, "status": "FAILED"}
    if isinstance(spec, CLIError):
        result["error"] = spec.message
        result["kind"] = "config"
        return result
    if spec is None or spec.disabled:
        result.update(status="SKIPPED", ok=True, skipped=True, error=None)
        return result
    target = target_from_spec(spec, label=name)
    limit = timeout or spec.timeout or DEFAULT_TIMEOUT
    tail = StderrTail() if target.argv is not None else None
    watch = ProcessWatch()
    client = make_client(target, timeout=limit, stderr=tail, watch=watch)
    try:
        async with asyncio.timeout(limit):
            await client.connect()
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        if tail is not None:
            await asyncio.sleep(0.1)
        err = connect_error(target, exc, tail, limit, watch.returncode)
        result["error"] = err.message
        if err.hint:
            result["hint"] = err.hint
        result["kind"] = "connection"
        result["seconds"] = round(time.perf_counter() - started, 3)
        return result
    try:
        tools = await client.list_tools()
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        err = request_error(exc, "tools/list")
        result["error"] = err.message
        result["kind"] = "connection" if err.code == EXIT_CONNECT else "protocol"
    else:
        info = client.server_info
        result.update(
            ok=True,
            status="OK",
            error=None,
            tools=[tool.name for tool in tools],
            serverInfo={"name": info.name, "version": info.version} if info is not None else None,
            protocolVersion=client.protocol_version.value if client.protocol_version else None,
        )
    finally:
        await client.close()
    result["seconds"] = round(time.perf_counter() - started, 3)
    return result


def _status_style(status: str) -> tuple[str, ...]:
    return {"OK": ("green", "bold"), "FAILED": ("red", "bold")}.get(status, ("yellow",))


def _specs_for_check(path: Path) -> list[tuple[str, ServerSpec | CLIError | None]]:
    """Each server of the file, expanded on its own so one bad entry fails alone."""
    data = read_config_data(path)
    fmt, entries = server_entries(data, path)
    out: list[tuple[str, ServerSpec | CLIError | None]] = []
    for name, entry in entries.items():
        if isinstance(entry, dict) and entry.get("disabled") is True:
            out.append((name, None))  # not started, so its variables need no values
            continue
        try:
            out.append((name, parse_entries(data, fmt, {name: entry}, path)[name]))
        except CLIError as exc:
            out.append((name, exc))
    return out


def cmd_config_check(args: argparse.Namespace, console: Console) -> int:
    files, explicit = _config_files(args)
    plan: list[tuple[str, Path, list[tuple[str, ServerSpec | CLIError | None]] | CLIError]] = []
    for label, path in files:
        try:
            plan.append((label, path, _specs_for_check(path)))
        except CLIError as exc:
            if explicit:
                raise
            if "no server list" not in exc.message:
                plan.append((label, path, exc))
    return run_loop(_check(plan, explicit, args, console))


async def _check(
    plan: list[tuple[str, Path, list[tuple[str, ServerSpec | CLIError | None]] | CLIError]],
    explicit: bool,
    args: argparse.Namespace,
    console: Console,
) -> int:
    gate = asyncio.Semaphore(8)
    total = sum(len(specs) for _, _, specs in plan if not isinstance(specs, CLIError))
    done = 0
    report: list[dict[str, Any]] = []
    async with Spinner(console, f"checking {total} server(s)") as spinner:

        async def bounded(spec: ServerSpec | CLIError | None, name: str) -> dict[str, Any]:
            nonlocal done
            async with gate:
                result = await _check_one(spec, name, args.timeout)
            done += 1
            spinner.update(f"checking {total} server(s): {done} done")
            return result

        for label, path, specs in plan:
            item: dict[str, Any] = {"label": label, "path": str(path), "servers": []}
            if isinstance(specs, CLIError):
                item["error"] = specs.message
            else:
                item["servers"] = list(await asyncio.gather(*(bounded(s, name) for name, s in specs)))
            report.append(item)
    results = [server for item in report for server in item["servers"]]
    failed = [r for r in results if not r["ok"]]
    kinds = {r.get("kind") for r in failed}
    if "connection" in kinds:
        code = EXIT_CONNECT
    elif "protocol" in kinds:
        code = EXIT_PROTOCOL
    elif failed or any("error" in item for item in report):
        code = EXIT_ERROR
    else:
        code = EXIT_OK
    if console.json_mode:
        console.emit_json({"ok": code == EXIT_OK, "files": report})
        return code
    for i, item in enumerate(report):
        if i:
            console.print()
        console.print(console.style(item["path"] if explicit else f"{item['label']}: {item['path']}", "bold"))
        if "error" in item:
            console.print("  " + console.style(f"error: {item['error']}", "red"))
            continue
        rows: list[list[str]] = []
        for r in item["servers"]:
            if r["status"] == "OK":
                info = r.get("serverInfo") or {}
                who = f"{info.get('name', '?')} {info.get('version', '')}".strip()
                detail = f"{len(r['tools'])} tool(s); {who}; protocol {r.get('protocolVersion')}"
            elif r["status"] == "SKIPPED":
                detail = "disabled"
            else:
                detail = str(r["error"])
            seconds = f"{r['seconds']:.1f}s" if "seconds" in r else ""
            rows.append([r["name"], r["status"], seconds, detail])
        console.table(rows, styles=[("cyan",), _status_style, ("dim",), ()])
        for r in item["servers"]:
            error = r.get("error")
            if error and "\n" in error:
                console.print(f"  {r['name']}: {error}".replace("\n", "\n    "))
            if r.get("hint"):
                console.print(f"  {r['name']}: " + console.style(f"hint: {r['hint']}", "dim"))
    ok = sum(1 for r in results if r["status"] == "OK")
    summary = f"{ok}/{len(results)} server(s) answered"
    if failed:
        summary += f", {len(failed)} failed"
    console.info(summary)
    return code


# -- gateway ---------------------------------------------------------------------------


def cmd_gateway(args: argparse.Namespace, console: Console) -> int:
    from ..host import AuditLog, ConfigError, Host, Policy, build_gateway

    config = Path(args.config or DEFAULT_CONFIG)
    if not config.is_file():
        raise CLIError(f"config file not found: {config}", EXIT_USAGE)
    auth, checks = gateway_auth(args)
    policy: Policy | None = None
    if args.allow or args.deny or args.ask or args.settings or args.default:
        try:
            allow, ask, deny = list(args.allow), list(args.ask), list(args.deny)
            if args.settings:
                base = Policy.from_settings(args.settings)
                allow, ask, deny = [*base.allow, *allow], [*base.ask, *ask], [*base.deny, *deny]
            default = cast("Decision", args.default or ("ask" if allow or ask else "allow"))
            policy = Policy(allow=tuple(allow), ask=tuple(ask), deny=tuple(deny), default=default)
        except (ValueError, OSError) as exc:
            raise CLIError(f"permission rules: {exc}", EXIT_USAGE) from None
    audit = None
    if args.audit:
        try:
            audit = AuditLog(args.audit, full_arguments=args.audit_arguments)
        except OSError as exc:
            raise CLIError(
                f"cannot open the audit log {args.audit}: {exc.strerror or exc}", EXIT_ERROR
            ) from None
    from ._audit import approve_hint, open_pins

    pins = None if args.no_pins else open_pins(config, args.pins)
    try:
        host = Host(
            config,
            policy=policy,
            audit=audit,
            connect_timeout=args.timeout,
            pins=pins,
            approve_hint=approve_hint(config, args.pins),
        )
    except ConfigError as exc:
        raise CLIError(str(exc), EXIT_ERROR) from None
    server = build_gateway(host, name=args.name)
    where = "stdio" if args.transport == "stdio" else f"http://{args.host}:{args.port}/mcp"
    rules = "no permission rules" if policy is None else f"default {policy.default}"
    if auth is not None:
        rules += f"; OAuth protected: {checks}"
    console.info(f"mcpkit gateway: {config} on {where} ({rules})")
    try:
        if args.transport == "stdio":
            server.run("stdio")
        else:
            server.run("http", host=args.host, port=args.port, auth=auth, resource_url=args.resource_url)
    except ImportError as exc:
        raise CLIError(
            f"HTTP needs the http extra ({exc})", EXIT_ERROR, hint="pip install 'mcpkit[http]'"
        ) from None
    finally:
        if audit is not None:
            audit.close()
    return EXIT_OK
