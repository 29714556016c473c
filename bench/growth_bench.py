"""Memory growth benchmark: a server's RSS over 100,000 ``tools/call`` requests, in every mode.

Modes: ``stdio-seq`` (one request in flight), ``stdio-pipe`` (batches of 2,000 written at once, then read),
``http-json`` / ``http-sse`` (legacy stateful session, JSON / SSE responses, one session for the whole run),
``http-modern`` (2026-07-28 stateless requests, the server's default response setting). Each mode gets a fresh
server process (``bench/servers/*_echo.py`` over pipes with the raw client of ``stdio_bench.py``;
``*_http.py`` under ``wrk -t1 -c16`` with the checking Lua script of ``http_bench.py``).

For each: handshake, 2,000 warm-up calls in the same mode, then the baseline VmRSS; then 100,000 calls with
VmRSS read at checkpoints; growth = VmRSS after the 100,000 - baseline (also shown: from the idle RSS right
after the handshake, and the peak VmHWM). The target for mcpkit: < 5 MiB in every mode. Every response is
checked; every wait is bounded. By default only mcpkit runs (the other Python peers serve ~500-2,000 calls/s
here, so 100k calls in five modes would take many minutes); ``--peers`` adds others.

Usage::

    python bench/growth_bench.py                 # mcpkit, 100k calls per mode; writes its RESULTS.md section
    python bench/growth_bench.py --smoke         # mcpkit, 2k calls per mode, no writing
    python bench/growth_bench.py --calls 50000 --modes stdio-seq http-json --peers mcpkit official
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import http_bench
import httpx
import stdio_bench
from common import (
    BenchFailure,
    McpkitSource,
    add_run_options,
    finish,
    fmt,
    load_average,
    machine_lines,
    mcpkit_source,
    proc_status_kib,
    report_head,
)
from peers import HTTP_MODES, HTTP_SCRIPTS, peer_env, setup_peers, stdio_argv

SECTION = "growth_bench"
MODES = ("stdio-seq", "stdio-pipe", "http-json", "http-sse", "http-modern")
DEFAULT_CALLS = 100_000
WARMUP_CALLS = 2_000
PIPE_BATCH = 2_000
CHECKPOINTS = 5
HTTP_CONNS = 16
TARGET_MIB = 5.0
MAX_SECONDS_PER_MODE = 300.0  # a mode that cannot finish its calls in time fails (and says how far it got)


@dataclass
class GrowthResult:
    calls: int
    seconds: float
    idle_kib: int  # right after the handshake
    base_kib: int  # after the warm-up
    end_kib: int
    hwm_kib: int
    checkpoints: list[tuple[int, int]] = field(default_factory=list)  # (calls so far, VmRSS KiB)
    notes: list[str] = field(default_factory=list)

    @property
    def growth_mib(self) -> float:
        return (self.end_kib - self.base_kib) / 1024

    @property
    def growth_from_idle_mib(self) -> float:
        return (self.end_kib - self.idle_kib) / 1024


# ---------------------------------------------------------------------------------------------- stdio


async def run_stdio(peer: str, mode: str, calls: int, source: McpkitSource) -> GrowthResult:
    spec = stdio_bench.ServerSpec(peer, stdio_argv(peer), peer_env(peer, source))
    with tempfile.TemporaryFile() as stderr_file:
        client = stdio_bench.RawClient(spec, stderr_file, stdio_bench.DEFAULT_CLIENT_READ_KIB * 1024)
        try:
            async with asyncio.timeout(MAX_SECONDS_PER_MODE):
                await client.spawn()
                await client.initialize()
                client.notify_initialized()
                await client.list_tools()
                idle = proc_status_kib(client.pid)["VmRSS"]
                step = client.sequential if mode == "stdio-seq" else client.pipelined
                batch = 1 if mode == "stdio-seq" else PIPE_BATCH
                for _ in range(0, WARMUP_CALLS, max(batch, 500)):
                    await step(max(batch, 500))
                base = proc_status_kib(client.pid)["VmRSS"]
                done = 0
                marks: list[tuple[int, int]] = []
                every = calls // CHECKPOINTS
                t0 = time.perf_counter()
                while done < calls:
                    chunk = min(PIPE_BATCH if mode == "stdio-pipe" else every - done % every, calls - done)
                    await step(chunk)
                    done += chunk
                    if done % every == 0 or done == calls:
                        marks.append((done, proc_status_kib(client.pid)["VmRSS"]))
                seconds = time.perf_counter() - t0
                status = proc_status_kib(client.pid)
        except TimeoutError as exc:
            raise BenchFailure(f"did not finish within {MAX_SECONDS_PER_MODE:g} s") from exc
        except BenchFailure as exc:
            await client.close(stdio_bench.FAILED_CLOSE_TIMEOUT_S)
            raise BenchFailure(f"{exc}{client.stderr_tail()}") from exc
        finally:
            await client.close()
    return GrowthResult(calls, seconds, idle, base, status["VmRSS"], status["VmHWM"], marks)


# ----------------------------------------------------------------------------------------------- HTTP


def run_http(wrk: str, peer: str, mode: str, calls: int, source: McpkitSource) -> GrowthResult:
    http_mode = http_bench.MODES[mode.removeprefix("http-")]
    spec = http_bench.ServerSpec(peer, peer_env(peer, source))
    with tempfile.TemporaryFile() as log, httpx.Client(timeout=10.0) as client:
        server = http_bench.ServerProcess(spec, http_mode.name, log)
        try:
            server.start()
            session = http_bench.open_session(client, server.url) if http_mode.session else None
            idle = proc_status_kib(server.pid)["VmRSS"]
            # Warm-up: about WARMUP_CALLS requests, also the rate estimate for sizing the wrk runs.
            warm = http_bench.run_wrk(wrk, server.url, HTTP_CONNS, 1, http_mode.era, session, server.pid)
            rate = max(warm.rps, 50.0)
            base = proc_status_kib(server.pid)["VmRSS"]
            done = 0
            marks: list[tuple[int, int]] = []
            t0 = time.perf_counter()
            every = calls / CHECKPOINTS
            while done < calls:
                if time.perf_counter() - t0 > MAX_SECONDS_PER_MODE:
                    raise BenchFailure(
                        f"only {done:,} of {calls:,} calls in {MAX_SECONDS_PER_MODE:g} s (wrk runs)"
                    )
                want = min(every, calls - done)
                seconds = max(1, round(want / rate))
                result = http_bench.run_wrk(
                    wrk, server.url, HTTP_CONNS, seconds, http_mode.era, session, server.pid
                )
                done += result.requests
                rate = max(result.rps, 50.0)
                marks.append((done, proc_status_kib(server.pid)["VmRSS"]))
            elapsed = time.perf_counter() - t0
            status = proc_status_kib(server.pid)
            if session is not None:
                http_bench.close_session(client, server.url, session)
        except (BenchFailure, httpx.HTTPError) as exc:
            server.stop()
            raise BenchFailure(f"{exc}{server.log_tail()}") from exc
        finally:
            server.stop()
    notes = [f"warm-up: {warm.requests:,} requests"]
    return GrowthResult(done, elapsed, idle, base, status["VmRSS"], status["VmHWM"], marks, notes)


# ------------------------------------------------------------------------------------------------ runs


@dataclass
class GrowthStats:
    results: dict[tuple[str, str], GrowthResult] = field(default_factory=dict)
    failures: dict[tuple[str, str], str] = field(default_factory=dict)


def supported(peer: str, mode: str) -> bool:
    if mode.startswith("http-"):
        return peer in HTTP_SCRIPTS and mode.removeprefix("http-") in HTTP_MODES[peer]
    return True


def bench(
    wrk: str | None,
    peers: Sequence[str],
    modes: Sequence[str],
    calls: int,
    source: McpkitSource,
    seed: int,
) -> GrowthStats:
    stats = GrowthStats()
    units = [(p, m) for p in peers for m in modes if supported(p, m)]
    random.Random(seed).shuffle(units)
    for peer, mode in units:
        t0 = time.perf_counter()
        try:
            if mode.startswith("stdio-"):
                result = asyncio.run(run_stdio(peer, mode, calls, source))
            else:
                assert wrk is not None
                result = run_http(wrk, peer, mode, calls, source)
        except (BenchFailure, OSError) as exc:
            stats.failures[(peer, mode)] = str(exc)
            print(f"  {peer:8} {mode:11} FAILED: {exc}", file=sys.stderr, flush=True)
            continue
        stats.results[(peer, mode)] = result
        print(
            f"  {peer:8} {mode:11} {result.calls:,} calls in {result.seconds:5.1f} s: rss "
            f"{result.base_kib / 1024:.1f} -> {result.end_kib / 1024:.1f} MiB "
            f"(growth {result.growth_mib:+.2f} MiB)"
            f"  [{time.perf_counter() - t0:.0f} s]",
            file=sys.stderr,
            flush=True,
        )
    return stats


def summary(stats: GrowthStats) -> dict[tuple[str, str], float]:
    """Growth in MiB (after warm-up -> after the calls) per (peer, mode)."""
    return {key: r.growth_mib for key, r in stats.results.items()}


# -------------------------------------------------------------------------------------------- report


def render_report(
    stats: GrowthStats,
    peers: Sequence[str],
    modes: Sequence[str],
    calls: int,
    machine: list[str],
    title_level: str = "#",
) -> str:
    h2 = title_level + "#"
    lines = report_head(
        f"Memory: RSS growth over {calls:,} `tools/call` requests per mode", machine, title_level
    )
    add = lines.append
    add(
        f"A fresh server process per mode; handshake, {WARMUP_CALLS:,} warm-up calls (HTTP: a 1 s wrk run), "
        f"baseline VmRSS, then {calls:,} calls (stdio: raw client, pipelined in batches of {PIPE_BATCH:,}; "
        f"HTTP: `wrk -t1 -c{HTTP_CONNS}`, one session for the whole run in the legacy modes), VmRSS at "
        f"{CHECKPOINTS} checkpoints. Growth = VmRSS at the end - baseline; target for mcpkit: "
        f"< {TARGET_MIB:g} MiB in every mode. Runs in one shuffled order, each mode once."
    )
    add("")
    add(
        "| server | mode | calls | calls/s | idle RSS MiB | baseline MiB | end RSS MiB | growth MiB "
        "| growth from idle MiB | peak HWM MiB | < 5 MiB |"
    )
    add("|---|---|---|---|---|---|---|---|---|---|---|")
    for peer in peers:
        for mode in modes:
            r = stats.results.get((peer, mode))
            if r is None:
                why = stats.failures.get((peer, mode))
                if why is not None:
                    add(f"| {peer} | `{mode}` | FAILED: {why.splitlines()[0][:120]} |" + " |" * 8)
                continue
            add(
                f"| **{peer}** | `{mode}` | {r.calls:,} | {fmt(r.calls / r.seconds)} "
                f"| {r.idle_kib / 1024:.1f} "
                f"| {r.base_kib / 1024:.1f} | {r.end_kib / 1024:.1f} | {r.growth_mib:+.2f} "
                f"| {r.growth_from_idle_mib:+.2f} | {r.hwm_kib / 1024:.1f} "
                f"| {'yes' if r.growth_mib < TARGET_MIB else 'no'} |"
            )
    add("")
    add(f"{h2} VmRSS at the checkpoints (calls so far: MiB)")
    add("")
    add("| server | mode | checkpoints |")
    add("|---|---|---|")
    for (peer, mode), r in stats.results.items():
        marks = ", ".join(f"{n / 1000:.1f}k: {kib / 1024:.1f}" for n, kib in r.checkpoints)
        add(f"| {peer} | `{mode}` | {marks} |")
    add("")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------- main


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--smoke", action="store_true", help="2,000 calls per mode, no writing")
    parser.add_argument("--calls", type=int, default=None, help=f"calls per mode (default {DEFAULT_CALLS:,})")
    parser.add_argument("--modes", nargs="+", choices=MODES, default=None, help="modes (default: all)")
    parser.add_argument("--peers", nargs="+", default=None, help="servers (default: mcpkit)")
    add_run_options(parser)
    args = parser.parse_args(argv)
    calls = args.calls or (2_000 if args.smoke else DEFAULT_CALLS)
    modes = tuple(args.modes or MODES)
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    setup = setup_peers(args.peers or ["mcpkit"])
    wrk = None
    if any(m.startswith("http-") for m in modes):
        wrk, _ = http_bench.ensure_wrk()
    source = mcpkit_source(snapshot=not args.live_source)
    load_before = load_average()
    try:
        stats = bench(wrk, setup.available, modes, calls, source, seed)
    finally:
        source.cleanup()
    machine = [
        *machine_lines(),
        f"mcpkit imported from: {source.note}",
        *setup.lines(),
        f"calls per mode {calls:,}, modes {list(modes)}, shuffle seed {seed}",
        f"load average (1/5/15 min) before: {load_before}; after: {load_average()}",
    ]
    report = render_report(stats, setup.available, modes, calls, machine)
    return finish(
        report,
        bool(stats.failures),
        write=not args.smoke and not args.no_write,
        section=SECTION,
        label="memory-growth",
    )


if __name__ == "__main__":
    sys.exit(main())
