"""Client-side benchmark: mcpkit ``Client`` -> mcpkit server vs ``mcp.Client`` -> official server.

Both over stdio, in the same run, interleaved in shuffled order, several repetitions, medians. Every run is
a fresh child process (``python bench/client_bench.py --child KIND``) that imports the client library,
spawns the server through the library's own stdio transport (``bench/servers/mcpkit_echo.py`` /
``official_echo.py``), connects, lists the tools, makes 50 warm-up calls and then:

* sequential: N ``call_tool("echo", {"text": ...})`` calls, one at a time;
* pipelined: N calls issued at once with ``asyncio.gather``;

and checks every result. Kinds: ``mcpkit`` (``Client(argv, protocol="legacy")``: the ``initialize``
handshake at 2025-11-25, like the official client's ``mode="legacy"``), ``mcpkit-auto`` (mcpkit's default
``protocol="auto"``, which probes ``server/discover`` and talks 2026-07-28 to an mcpkit server) and
``official`` (``mcp.Client(StdioServerParameters(...), mode="legacy")``). Client and server CPU per call
come from ``/proc`` (the server is the child's only child process).

Usage::

    python bench/client_bench.py              # N=1000, 5 reps; writes its section of bench/RESULTS.md
    python bench/client_bench.py --smoke      # N=100, 1 rep, no writing
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common import (
    CLK_TCK,
    SERVERS_DIR,
    TEXT,
    BenchFailure,
    McpkitSource,
    add_run_options,
    finish,
    fmt,
    load_average,
    machine_lines,
    mcpkit_source,
    package_version,
    proc_cpu_ticks,
    ratio,
    report_head,
)

SECTION = "client_bench"
KINDS = ("mcpkit", "mcpkit-auto", "official")
LABELS = {
    "mcpkit": 'mcpkit `Client(protocol="legacy")` -> mcpkit server',
    "mcpkit-auto": 'mcpkit `Client()` (`protocol="auto"`: 2026-07-28) -> mcpkit server',
    "official": '`mcp.Client(mode="legacy")` -> official server',
}
WARMUP_CALLS = 50
CHILD_TIMEOUT_S = 180.0


# ---------------------------------------------------------------------------------------------- child


def _server_pid() -> int | None:
    kids: list[int] = []
    for task in Path("/proc/self/task").iterdir():
        try:
            kids += [int(x) for x in (task / "children").read_text().split()]
        except OSError:
            continue
    return kids[0] if len(kids) == 1 else None


def _check(result: Any) -> None:
    content = getattr(result, "content", None)
    is_error = getattr(result, "is_error", getattr(result, "isError", None))
    if not content or getattr(content[0], "text", None) != TEXT or is_error:
        raise BenchFailure(f"wrong tool result: {result!r}"[:300])


async def _phases(call: Any, n: int) -> dict[str, float]:
    for _ in range(WARMUP_CALLS):
        _check(await call())
    pid = _server_pid()
    out: dict[str, float] = {}
    for phase in ("seq", "pipe"):
        s0 = proc_cpu_ticks(pid) if pid else 0
        c0 = time.process_time()
        t0 = time.perf_counter()
        if phase == "seq":
            for _ in range(n):
                _check(await call())
        else:
            for result in await asyncio.gather(*(call() for _ in range(n))):
                _check(result)
        out[f"{phase}_s"] = time.perf_counter() - t0
        out[f"{phase}_client_cpu_us"] = (time.process_time() - c0) * 1e6 / n
        if pid:
            out[f"{phase}_server_cpu_us"] = (proc_cpu_ticks(pid) - s0) * 1e6 / CLK_TCK / n
    return out


async def child_mcpkit(n: int, protocol: str) -> dict[str, float]:
    from mcpkit import Client

    t0 = time.perf_counter()
    async with Client([sys.executable, str(SERVERS_DIR / "mcpkit_echo.py")], protocol=protocol) as client:  # type: ignore[arg-type]
        connect_ms = (time.perf_counter() - t0) * 1e3
        tools = await client.list_tools()
        if [t.name for t in tools] != ["echo"]:
            raise BenchFailure(f"tools/list: {tools!r}")

        async def call() -> Any:
            return await client.call_tool("echo", {"text": TEXT})

        out = await _phases(call, n)
        out["protocol"] = str(client.protocol_version)  # type: ignore[assignment]
    return {"connect_ms": connect_ms, **out}


async def child_official(n: int) -> dict[str, float]:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(command=sys.executable, args=[str(SERVERS_DIR / "official_echo.py")])
    t0 = time.perf_counter()
    async with Client(params, mode="legacy") as client:
        connect_ms = (time.perf_counter() - t0) * 1e3
        tools = await client.list_tools()
        if [t.name for t in tools.tools] != ["echo"]:
            raise BenchFailure(f"tools/list: {tools!r}")

        async def call() -> Any:
            return await client.call_tool("echo", {"text": TEXT})

        out = await _phases(call, n)
        out["protocol"] = str(client.protocol_version)  # type: ignore[assignment]
    return {"connect_ms": connect_ms, **out}


def child_main(kind: str, n: int) -> int:
    async def run() -> dict[str, float]:
        async with asyncio.timeout(CHILD_TIMEOUT_S - 10):
            if kind == "official":
                return await child_official(n)
            return await child_mcpkit(n, "legacy" if kind == "mcpkit" else "auto")

    if kind == "official":
        result = asyncio.run(run())
    else:  # mcpkit's client on mcpkit's loop choice (MCPKIT_LOOP; uvloop when installed)
        from mcpkit.transports.loop import run as run_loop

        result = run_loop(run())
    print("CLIENT_RESULT " + json.dumps(result), flush=True)
    return 0


# --------------------------------------------------------------------------------------------- parent


@dataclass
class ClientStats:
    runs: list[dict[str, Any]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def median(self, key: str) -> float | None:
        values = [r[key] for r in self.runs if key in r]
        return statistics.median(values) if values else None

    def rate(self, phase: str, n: int) -> float | None:
        values = [n / r[f"{phase}_s"] for r in self.runs]
        return statistics.median(values) if values else None


def run_child(kind: str, n: int, source: McpkitSource) -> dict[str, Any]:
    env = {**os.environ, **(source.env if kind.startswith("mcpkit") else {})}
    argv = [sys.executable, str(Path(__file__).resolve()), "--child", kind, "--n", str(n)]
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S, env=env, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise BenchFailure(f"did not finish within {CHILD_TIMEOUT_S:g} s") from exc
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("CLIENT_RESULT ")), None)
    if done.returncode != 0 or line is None:
        tail = " | ".join((done.stdout + done.stderr).strip().splitlines()[-6:])
        raise BenchFailure(f"exit {done.returncode}: {tail}")
    return dict(json.loads(line.removeprefix("CLIENT_RESULT ")))


def bench(kinds: Sequence[str], n: int, reps: int, source: McpkitSource, seed: int) -> dict[str, ClientStats]:
    stats = {k: ClientStats() for k in kinds}
    rng = random.Random(seed)
    for rep in range(1, reps + 1):
        order = list(kinds)
        rng.shuffle(order)
        print(f"rep {rep}/{reps}: {' -> '.join(order)}", file=sys.stderr, flush=True)
        for kind in order:
            try:
                result = run_child(kind, n, source)
            except (BenchFailure, OSError) as exc:
                stats[kind].failures.append(f"rep {rep}: {exc}")
                print(f"  {kind}: FAILED: {exc}", file=sys.stderr, flush=True)
                continue
            stats[kind].runs.append(result)
            print(
                f"  {kind:12} connect {result['connect_ms']:7.1f} ms  seq {n / result['seq_s']:8,.0f}/s  "
                f"pipe {n / result['pipe_s']:8,.0f}/s",
                file=sys.stderr,
                flush=True,
            )
    return stats


def summary(stats: dict[str, ClientStats], n: int) -> dict[str, dict[str, float | None]]:
    return {k: {"seq": s.rate("seq", n), "pipe": s.rate("pipe", n)} for k, s in stats.items()}


def render_report(
    stats: dict[str, ClientStats], n: int, reps: int, machine: list[str], title_level: str = "#"
) -> str:
    h2 = title_level + "#"
    lines = report_head("Client side: SDK client -> its own server over stdio", machine, title_level)
    add = lines.append
    add(
        f"A fresh process per run: import the client, spawn the server through the client's stdio "
        f"transport, connect, `list_tools`, {WARMUP_CALLS} warm-up calls, then N={n:,} sequential "
        f"`call_tool` calls and N calls at once with `asyncio.gather`; every result checked; kinds "
        f"interleaved in shuffled order; medians of {reps} repetition(s). CPU per call: the client process "
        "(`time.process_time`) and the server process (`/proc/PID/stat`, 10 ms ticks)."
    )
    add("")
    add(
        "| client -> server | runs | protocol | connect ms | seq calls/s | seq mean µs | pipelined calls/s "
        "| client CPU µs/call seq | server CPU µs/call seq | client CPU µs/call pipe "
        "| server CPU µs/call pipe |"
    )
    add("|---|---|---|---|---|---|---|---|---|---|---|")
    for kind, s in stats.items():
        if not s.runs:
            add(f"| {LABELS[kind]} | 0/{reps} |" + " n/a |" * 9)
            continue
        seq = s.rate("seq", n)
        add(
            f"| {LABELS[kind]} | {len(s.runs)}/{reps} | {s.runs[-1].get('protocol', '?')} "
            f"| {fmt(s.median('connect_ms'), 1)} | {fmt(seq)} | {fmt(1e6 / seq if seq else None, 1)} "
            f"| {fmt(s.rate('pipe', n))} | {fmt(s.median('seq_client_cpu_us'), 1)} "
            f"| {fmt(s.median('seq_server_cpu_us'), 1)} | {fmt(s.median('pipe_client_cpu_us'), 1)} "
            f"| {fmt(s.median('pipe_server_cpu_us'), 1)} |"
        )
    add("")
    if "mcpkit" in stats and "official" in stats:
        mk, of = stats["mcpkit"], stats["official"]
        add(f"{h2} Ratios (mcpkit ÷ official)")
        add("")
        add("| metric | mcpkit | official | mcpkit ÷ official |")
        add("|---|---|---|---|")
        for label, a, b in (
            ("seq calls/s", mk.rate("seq", n), of.rate("seq", n)),
            ("pipelined calls/s", mk.rate("pipe", n), of.rate("pipe", n)),
            ("connect ms", mk.median("connect_ms"), of.median("connect_ms")),
            ("client CPU µs/call (seq)", mk.median("seq_client_cpu_us"), of.median("seq_client_cpu_us")),
        ):
            add(f"| {label} | {fmt(a, 1)} | {fmt(b, 1)} | {ratio(a, b)} |")
        add("")
    add(f"{h2} Per-repetition seq / pipelined calls/s")
    add("")
    add("| client -> server | seq | pipelined |")
    add("|---|---|---|")
    for kind, s in stats.items():
        add(
            f"| {LABELS[kind]} | {' / '.join(fmt(n / r['seq_s']) for r in s.runs) or 'n/a'} "
            f"| {' / '.join(fmt(n / r['pipe_s']) for r in s.runs) or 'n/a'} |"
        )
    add("")
    failures = [(k, f) for k, s in stats.items() for f in s.failures]
    if failures:
        add(f"{h2} Failures")
        add("")
        for kind, failure in failures:
            add(f"- **{kind}** {failure.splitlines()[0][:300]}")
        add("")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--child", choices=KINDS, help=argparse.SUPPRESS)
    parser.add_argument("--smoke", action="store_true", help="N=100, 1 rep, no writing")
    parser.add_argument("--n", type=int, default=None, help="calls per phase (default 1000; smoke 100)")
    parser.add_argument("--reps", type=int, default=None, help="repetitions (default 5; smoke 1)")
    parser.add_argument("--kinds", nargs="+", choices=KINDS, default=None, help="default: all")
    add_run_options(parser)
    args = parser.parse_args(argv)
    n = args.n or (100 if args.smoke else 1000)
    if args.child:
        return child_main(args.child, n)
    reps = args.reps or (1 if args.smoke else 5)
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    source = mcpkit_source(snapshot=not args.live_source)
    load_before = load_average()
    try:
        stats = bench(args.kinds or KINDS, n, reps, source, seed)
    finally:
        source.cleanup()
    machine = [
        *machine_lines(),
        f"packages: mcp {package_version('mcp')}; mcpkit imported from: {source.note}",
        f"N={n}, reps={reps}, shuffle seed {seed}",
        f"load average (1/5/15 min) before: {load_before}; after: {load_average()}",
    ]
    report = render_report(stats, n, reps, machine)
    return finish(
        report,
        bool(any(s.failures for s in stats.values())),
        write=not args.smoke and not args.no_write,
        section=SECTION,
        label="client",
    )


if __name__ == "__main__":
    sys.exit(main())
