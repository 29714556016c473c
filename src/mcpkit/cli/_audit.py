"""``mcpkit audit-servers`` and ``mcpkit pins``: what is risky in a config's servers, and
which tool definitions the user approved.

``audit-servers`` connects to every server and prints one finding per line (or
``--json``); it exits 1 when a finding is at or above ``--fail-on``.
``pins list`` shows the approved definitions, ``pins accept`` approves a changed
one (the pending definition the host saw, or the server's current one), and
``pins forget`` drops pins. The pins file is the one ``mcpkit gateway`` uses for
the same config (``--pins`` to choose another).
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..transports.loop import run as run_loop
from ._output import EXIT_ERROR, EXIT_OK, EXIT_USAGE, CLIError, Console
from ._target import DEFAULT_CONFIG

if TYPE_CHECKING:
    from ..host.config import ServerSpec
    from ..host.pins import PinStore

__all__ = ["approve_hint", "cmd_audit_servers", "cmd_pins_accept", "cmd_pins_forget", "cmd_pins_list"]


def _config(args: argparse.Namespace) -> Path:
    config = Path(args.config or DEFAULT_CONFIG)
    if not config.is_file():
        raise CLIError(f"config file not found: {config}", EXIT_USAGE)
    return config


def _specs(config: Path) -> dict[str, ServerSpec]:
    from ..host import ConfigError, load_config

    try:
        return load_config(config)
    except ConfigError as exc:
        raise CLIError(str(exc), EXIT_ERROR) from None


def open_pins(config: Path, path: str | None) -> PinStore:
    """The pins of ``config``: ``path``, or the default file for that config."""
    from ..host.pins import PinStore, default_pins_path

    try:
        return PinStore(path or default_pins_path(config))
    except ValueError as exc:
        raise CLIError(str(exc), EXIT_ERROR) from None


def approve_hint(config: Path, pins: str | None) -> str:
    """The command that approves a changed tool, for refusals (``{server}``/``{tool}`` left to fill)."""
    words = ["mcpkit", "pins", "accept", str(config), "{server}", "{tool}"]
    if pins:
        words += ["--pins", pins]
    return " ".join(w if w.startswith("{") else shlex.quote(w) for w in words)


# -- audit-servers ---------------------------------------------------------------------


def cmd_audit_servers(args: argparse.Namespace, console: Console) -> int:
    from ..host.audit import SEVERITIES, audit_servers

    config = _config(args)
    specs = _specs(config)
    pins = open_pins(config, args.pins)
    report = run_loop(
        audit_servers(
            specs,
            pins=pins,
            connect_timeout=args.timeout,
            connect=not args.offline,
            stderr=subprocess.DEVNULL,
        )
    )
    failing = [] if args.fail_on == "none" else report.at_least(args.fail_on)
    if console.json_mode:
        console.emit_json({**report.to_dict(), "config": str(config), "failOn": args.fail_on})
        return EXIT_ERROR if failing else EXIT_OK
    colours = {"high": ("red", "bold"), "medium": ("yellow",), "low": ("dim",), "info": ("dim",)}
    shown = report.at_least(args.min_severity)
    for finding in shown:
        console.print(console.style(finding.line(), *colours[finding.severity]))
        if args.verbose and finding.detail:
            from ..host.pins import visible

            for line in finding.detail.splitlines():
                console.print("    " + visible(line))
    counts = report.counts()
    summary = ", ".join(f"{counts[s]} {s}" for s in reversed(SEVERITIES) if counts[s])
    reached = sum(1 for state in report.servers.values() if state == "ok")
    enabled = sum(1 for state in report.servers.values() if state != "disabled")
    console.info(
        f"audited {reached} of {enabled} enabled server(s), {report.tools} tool(s): "
        + (summary or "no findings")
        + ("" if args.verbose or not any(f.detail for f in shown) else " (-v for details)")
    )
    return EXIT_ERROR if failing else EXIT_OK


# -- pins ----------------------------------------------------------------------------


def cmd_pins_list(args: argparse.Namespace, console: Console) -> int:
    config = _config(args)
    pins = open_pins(config, args.pins)
    items = pins.pins(args.server)
    if console.json_mode:
        console.emit_json(
            {
                "path": str(pins.path),
                "pins": [
                    {
                        "server": p.server,
                        "tool": p.tool,
                        "hash": p.hash,
                        "pinnedAt": p.pinned_at,
                        **({"removedAt": p.removed_at} if p.removed_at else {}),
                        **({"pending": p.pending["hash"]} if p.pending else {}),
                    }
                    for p in items
                ],
            }
        )
        return EXIT_OK
    console.info(f"pins: {pins.path}")
    for pin in items:
        state = (
            "changed, waiting for approval" if pin.pending else "removed" if pin.removed_at else "approved"
        )
        console.print(f"{pin.server}/{pin.tool}  {pin.hash[:19]}  {pin.pinned_at}  {state}")
    if not items:
        console.info("no pins")
    return EXIT_OK


def cmd_pins_accept(args: argparse.Namespace, console: Console) -> int:
    from ..host.pins import diff_definitions, visible

    config = _config(args)
    specs = _specs(config)
    if args.server not in specs:
        raise CLIError(f"no server named {args.server!r} in {config}", EXIT_USAGE)
    pins = open_pins(config, args.pins)
    wanted = list(args.tools)
    if not wanted:
        wanted = [p.tool for p in pins.pins(args.server) if p.pending]
    pending = [name for name in wanted if (p := pins.get(args.server, name)) is not None and p.pending]
    accepted: list[dict[str, Any]] = []
    for name in pending:
        before = pins.get(args.server, name)
        assert before is not None and before.pending is not None
        _show(
            console,
            f"{args.server}/{name}",
            diff_definitions(before.definition, before.pending["definition"]),
        )
        pin = pins.accept_pending(args.server, name)
        assert pin is not None
        accepted.append({"server": args.server, "tool": name, "hash": pin.hash, "from": "pending"})
    rest = [name for name in wanted if name not in pending] if args.tools else []
    if rest or not wanted:
        # Nothing pending: approve what the server lists now (all its tools, or those named).
        current = run_loop(_current_tools(specs[args.server], args.timeout))
        missing = [name for name in rest if name not in current]
        if missing:
            raise CLIError(
                f"server {args.server!r} lists no tool named {', '.join(map(repr, missing))}", EXIT_USAGE
            )
        for name in rest or list(current):
            old = pins.get(args.server, name)
            _show(
                console,
                f"{args.server}/{name}",
                diff_definitions(old.definition if old else None, current[name]),
            )
            pin = pins.pin(args.server, current[name])
            accepted.append({"server": args.server, "tool": name, "hash": pin.hash, "from": "server"})
    if console.json_mode:
        console.emit_json({"path": str(pins.path), "accepted": accepted})
    else:
        for item in accepted:
            console.info(visible(f"approved {item['server']}/{item['tool']} as {item['hash'][:19]}"))
    return EXIT_OK


def _show(console: Console, title: str, diff: str) -> None:
    if console.json_mode or not diff:
        return
    from ..host.pins import visible

    console.info(visible(f"--- {title}"))
    for line in diff.splitlines():
        colour = "green" if line.startswith("+") else "red" if line.startswith("-") else "dim"
        console.info(console.style(visible(line), colour, stream="err"))


async def _current_tools(spec: ServerSpec, timeout: float) -> dict[str, dict[str, Any]]:
    from ..host import Host
    from ..host.pins import definition_of

    host = Host({spec.name: spec}, pins=None, connect_timeout=timeout, stderr=subprocess.DEVNULL)
    async with host:
        error = host.errors.get(spec.name)
        if error:
            raise CLIError(f"cannot reach {spec.name!r}: {error}", EXIT_ERROR)
        return {tool.name: definition_of(tool) for tool in host.backend(spec.name).tools}


def cmd_pins_forget(args: argparse.Namespace, console: Console) -> int:
    config = _config(args)
    pins = open_pins(config, args.pins)
    dropped = pins.forget(args.server, args.tool)
    if console.json_mode:
        console.emit_json({"path": str(pins.path), "forgotten": dropped})
    else:
        console.info(f"forgot {dropped} pin(s)")
    return EXIT_OK
