"""What a proxy costs: 100 ``tools/call`` through ``MCPServer.proxy`` against 100 direct ones.

The backend is mcpkit's stdio echo server (``bench/servers/mcpkit_echo.py``), spawned by the
mcpkit ``Client``. Three ways of calling it, each connected first, then N sequential
``call_tool("echo")`` calls timed (after warm-up calls), in shuffled order within every
repetition, medians reported:

* ``direct``: ``Client(stdio backend)``;
* ``proxied``: ``Client(MCPServer.proxy(stdio backend))``, the proxy in this process (in memory):
  what a proxy's own work adds to a call (the target: at most 1.5x direct, issue 16);
* ``proxied over stdio``: the proxy as its own process (``bench/servers/mcpkit_proxy.py``), the
  client talking stdio to it and it to the backend: two process hops instead of one (shown, no target);
* ``fresh session per call``: a new backend client (spawn + handshake) for every call, as a proxy
  without session reuse would do (N/10 calls, scaled to N).

Usage::

    python bench/proxy_bench.py           # N=100, 7 reps; writes its section of bench/RESULTS.md
    python bench/proxy_bench.py --smoke   # N=100, 1 rep, nothing written
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common import (
    CLK_TCK,
    SERVERS_DIR,
    McpkitSource,
    add_run_options,
    finish,
    fmt,
    load_average,
    machine_lines,
    mcpkit_source,
    proc_cpu_ticks,
    report_head,
)

SECTION = "proxy_bench"
KINDS = ("direct", "proxied", "proxied-stdio", "fresh-session")
LABELS = {
    "direct": "direct: `Client(stdio backend)`",
    "proxied": "proxied: `Client(MCPServer.proxy(stdio backend))` (proxy in process)",
    "proxied-stdio": "proxied over stdio (the proxy its own process: two hops)",
    "fresh-session": "a fresh backend session per call (no reuse; N/10 calls, scaled)",
}
TARGET = 1.5
N = 100
WARMUP = 20


@dataclass
class Stats:
    #: (wall seconds, CPU seconds of this process and every process under it) per run
    times: dict[str, list[tuple[float, float]]] = field(default_factory=lambda: {k: [] for k in KINDS})
    failures: list[str] = field(default_factory=list)

    def median(self, kind: str, cpu: bool = False) -> float | None:
        values = [run[1] if cpu else run[0] for run in self.times[kind]]
        return statistics.median(values) if values else None

    def ratio(self, kind: str, cpu: bool = False) -> float | None:
        mine, base = self.median(kind, cpu), self.median("direct", cpu)
        return mine / base if mine is not None and base else None


def _descendants(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            kids = [int(x) for x in (task / "children").read_text().split()]
        except OSError:
            continue
        for kid in kids:
            found += [kid, *_descendants(kid)]
    return found


def _cpu_s() -> float:
    """CPU seconds of this process and its live descendants (the backend, a proxy process)."""
    ticks = 0
    for pid in _descendants(os.getpid()):
        try:
            ticks += proc_cpu_ticks(pid)
        except OSError:
            continue
    return time.process_time() + ticks / CLK_TCK


async def _timed(client: Any, n: int) -> tuple[float, float]:
    for i in range(WARMUP):
        await client.call_tool("echo", {"text": f"warm {i}"})
    cpu, started = _cpu_s(), time.perf_counter()
    for i in range(n):
        result = await client.call_tool("echo", {"text": f"call {i}"})
        if result.content[0].text != f"call {i}":
            raise AssertionError(f"wrong answer: {result}")
    return time.perf_counter() - started, _cpu_s() - cpu


async def run_kind(kind: str, n: int, source: McpkitSource) -> tuple[float, float]:
    from mcpkit import Client, MCPServer

    backend = [sys.executable, str(SERVERS_DIR / "mcpkit_echo.py")]
    env = dict(source.env)
    if kind == "direct":
        async with Client(backend, env=env, protocol="legacy") as client:
            return await _timed(client, n)
    if kind == "proxied":
        proxy = MCPServer.proxy(Client(backend, env=env, protocol="legacy"))
        async with Client(proxy, protocol="legacy") as client:
            return await _timed(client, n)
    if kind == "proxied-stdio":
        command = [sys.executable, str(SERVERS_DIR / "mcpkit_proxy.py")]
        async with Client(command, env=env, protocol="legacy") as client:
            return await _timed(client, n)
    calls = max(n // 10, 1)
    started = time.perf_counter()
    for i in range(calls):
        async with Client(backend, env=env, protocol="legacy") as client:
            await client.call_tool("echo", {"text": f"call {i}"})
    return (time.perf_counter() - started) * n / calls, float("nan")  # (CPU of exited children: not read)


def bench(n: int, reps: int, seed: int, source: McpkitSource, kinds: Sequence[str] = KINDS) -> Stats:
    stats = Stats()
    rng = random.Random(seed)
    for _ in range(reps):
        order = list(kinds)
        rng.shuffle(order)
        for kind in order:
            try:
                stats.times[kind].append(asyncio.run(run_kind(kind, n, source)))
            except Exception as exc:  # reported, and the run fails
                stats.failures.append(f"{kind}: {type(exc).__name__}: {exc}")
    return stats


def summary(stats: Stats) -> dict[str, float | None]:
    """Median milliseconds per N calls of each way, and the proxied ratios (wall, CPU)."""
    medians = {kind: stats.median(kind) for kind in KINDS}
    return {kind: None if m is None else m * 1000 for kind, m in medians.items()} | {
        "ratio": stats.ratio("proxied"),
        "cpu_ratio": stats.ratio("proxied", cpu=True),
    }


def render(stats: Stats, n: int, reps: int, machine: list[str]) -> str:
    lines = report_head("Proxy: proxied calls against direct ones", machine, "##")
    lines += [
        "",
        f"mcpkit stdio echo backend, mcpkit `Client` (legacy handshake), {n} sequential `tools/call` after "
        f"{WARMUP} warm-up calls, {reps} repetitions in shuffled order, medians.",
        "",
        "Wall time, and CPU time of every process involved (this one and those under it: the backend, "
        "a proxy process), read from `/proc` around the timed calls.",
        "",
        f"| way | ms per {n} calls | ratio to direct | CPU ms per {n} calls | CPU ratio |",
        "|---|---|---|---|---|",
    ]
    for kind in KINDS:
        median, cpu = stats.median(kind), stats.median(kind, cpu=True)
        shown_cpu = None if cpu is None or cpu != cpu else cpu * 1000
        cpu_ratio = stats.ratio(kind, cpu=True)
        lines.append(
            f"| {LABELS[kind]} | {fmt(None if median is None else median * 1000, 1)} | "
            f"{fmt(stats.ratio(kind), 2)} | {fmt(shown_cpu, 1)} | "
            f"{fmt(None if cpu_ratio is None or cpu_ratio != cpu_ratio else cpu_ratio, 2)} |"
        )
    ratio = stats.ratio("proxied")
    met = ratio is not None and ratio <= TARGET
    lines += [
        "",
        f"Target (issue 16): {n} proxied calls cost at most {TARGET}x {n} direct ones: "
        f"{fmt(ratio, 2)}x, {'met' if met else '**NOT met**'}. The backend session is opened once and "
        "reused by every call; a proxy served as its own stdio process adds a second process hop "
        "(the row above), and a session per call costs a spawn and a handshake each time.",
    ]
    if stats.failures:
        lines += ["", "Failures:", *(f"- {f}" for f in stats.failures)]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--smoke", action="store_true", help="1 rep, nothing written")
    parser.add_argument("--n", type=int, default=N, help=f"calls per timed run (default {N})")
    parser.add_argument("--reps", type=int, default=None, help="repetitions (default 7)")
    add_run_options(parser)
    args = parser.parse_args(argv)
    reps = args.reps if args.reps is not None else (1 if args.smoke else 7)
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    source = mcpkit_source(snapshot=not args.live_source)
    load_before = load_average()
    try:
        stats = bench(args.n, reps, seed, source)
    finally:
        source.cleanup()
    machine = [
        *machine_lines(),
        f"load average before/after: {load_before} / {load_average()}",
        f"seed {seed}",
    ]
    report = render(stats, args.n, reps, machine)
    return finish(
        report, bool(stats.failures), write=not (args.smoke or args.no_write), section=SECTION, label="proxy"
    )


if __name__ == "__main__":
    sys.exit(main())
