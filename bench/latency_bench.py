"""Benchmark of latency under load: ``tools/call`` p50/p99/p99.9 at 50% and 90% of each server's maximum.

Method (issue 18, item 4):

* For each server (one process per (server, transport), in shuffled order) the maximum throughput is
  measured first: stdio = batches of N pipelined ``tools/call`` written at once, back to back for the
  same seconds as wrk runs (``stdio_bench.RawClient``); HTTP =
  ``wrk -t1 -c16`` in one legacy session with JSON responses (``http_bench.run_wrk``).
* Then an **open-loop** load at a constant arrival rate of 50% and 90% of that maximum (in shuffled
  order), for D seconds: request k is due at ``start + k / rate`` whether or not earlier ones were
  answered, and its latency is counted from when it was *due* (not when it was sent), so a server that
  falls behind is charged for the queue it builds (no coordinated omission). stdio: the due requests are
  written to the server's stdin in one write per loop turn (~1 ms ticks); HTTP: each due request goes out
  on an idle keep-alive connection of a pool (opened on demand, at most 64; beyond that it waits for one,
  and the wait counts).
* The load generator is one Python process on uvloop; its CPU use over the run is reported (`gen CPU`),
  with the rate it really achieved: a generator near 100% of a core, or an achieved rate below the target,
  means the figure is the generator's, not the server's. Every response is checked (id, echoed text).
* The server's CPU (``/proc``) is reported for every load and for the maximum's measurement, per
  request: a server whose CPU per request is higher one by one than in batches can reach 100% of a
  core below 90% of its batched maximum; its queue then grows for the rest of the run.

Usage::

    python bench/latency_bench.py            # full: all peers, stdio and HTTP, -d3s; writes RESULTS.md, plots
    python bench/latency_bench.py --smoke    # mcpkit/official, -d1s at toy sizes, nothing written
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import random
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import httpx
import stdio_bench
from common import (
    CLK_TCK,
    TEXT,
    BenchFailure,
    McpkitSource,
    add_run_options,
    failures_and_notes,
    finish,
    fmt,
    load_average,
    machine_lines,
    mcpkit_source,
    proc_cpu_ticks,
    ratio,
    report_head,
)
from connections_bench import LEGACY, RawHTTP, arun, plot_lines, rpc_message
from http_bench import (
    LEGACY_VERSION,
    ServerProcess,
    ServerSpec,
    ensure_wrk,
    open_session,
    run_wrk,
    wrk_version,
)
from peers import HTTP_SCRIPTS, STDIO_SCRIPTS, peer_env, setup_peers, stdio_argv

SECTION = "latency_bench"
PEERS = ("mcpkit", "official", "fastmcp", "ts-sdk")
TRANSPORTS = ("stdio", "http")
FRACTIONS = (0.5, 0.9)
MAX_CONNS = 64
TICK_S = 0.001


@dataclass
class Point:
    target_rps: float
    achieved_rps: float
    p50_ms: float
    p99_ms: float
    p999_ms: float
    gen_cpu: float  # the generator's CPU seconds / wall seconds
    server_cpu: float  # the server process's CPU seconds / wall seconds (from /proc)
    server_us: float  # the server's CPU per answered request, µs


@dataclass
class Cell:
    max_rps: float | None = None
    #: the server's CPU per request while its maximum was measured (µs): batched, many per wake-up
    max_us: float | None = None
    points: dict[float, Point] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)


def percentiles(values: list[float]) -> tuple[float, float, float]:
    v = sorted(values)

    def q(p: float) -> float:
        return v[min(len(v) - 1, int(p * len(v)))]

    return q(0.5), q(0.99), q(0.999)


def make_point(rate: float, lat_s: list[float], wall: float, cpu: float, server_ticks: int) -> Point:
    p50, p99, p999 = percentiles(lat_s)
    server_s = server_ticks / CLK_TCK
    server_us = server_s / len(lat_s) * 1e6 if lat_s else 0.0
    return Point(
        rate, len(lat_s) / wall, p50 * 1e3, p99 * 1e3, p999 * 1e3, cpu / wall, server_s / wall, server_us
    )


# ----------------------------------------------------------------------------------------------- stdio


async def stdio_cell(name: str, source: McpkitSource, cfg: Settings, rng: random.Random, cell: Cell) -> None:
    spec = stdio_bench.ServerSpec(name, stdio_argv(name), peer_env(name, source))
    with tempfile.TemporaryFile() as err:
        client = stdio_bench.RawClient(spec, err, stdio_bench.DEFAULT_CLIENT_READ_KIB * 1024)
        await client.spawn()
        try:
            await client.initialize()
            client.notify_initialized()
            await client.list_tools()
            await client.pipelined(cfg.max_n // 4)  # warm-up, checked
            # Sustained, not one burst: batches of max_n pipelined calls for max_s seconds (a single
            # burst catches a lucky moment of CPU on a shared machine and overstates the maximum).
            t0 = time.perf_counter()
            ticks0 = proc_cpu_ticks(client.pid)
            done = 0
            while done == 0 or time.perf_counter() - t0 < cfg.max_s:
                await client.pipelined(cfg.max_n)
                done += cfg.max_n
            cell.max_rps = done / (time.perf_counter() - t0)
            cell.max_us = (proc_cpu_ticks(client.pid) - ticks0) / CLK_TCK / done * 1e6
            fractions = list(FRACTIONS)
            rng.shuffle(fractions)
            for f in fractions:
                cell.points[f] = await stdio_open_loop(client, f * cell.max_rps, cfg.duration_s)
        except (BenchFailure, OSError, TimeoutError) as exc:
            cell.failures.append(f"stdio: {exc}{client.stderr_tail()}")
        finally:
            await client.close()


async def stdio_open_loop(client: stdio_bench.RawClient, rate: float, duration: float) -> Point:
    n = max(10, int(rate * duration))
    first = client.next_id
    client.next_id += n
    due: dict[int, float] = {}
    lat: list[float] = []
    cpu0 = time.process_time()
    ticks0 = proc_cpu_ticks(client.pid)
    start = time.perf_counter() + 0.01

    async def writer() -> None:
        sent = 0
        while sent < n:
            now = time.perf_counter()
            upto = min(n, int((now - start) * rate) + 1) if now >= start else 0
            if upto > sent:
                batch = []
                for k in range(sent, upto):
                    due[first + k] = start + k / rate
                    batch.append(stdio_bench.call_bytes(first + k))
                client.write(b"".join(batch))
                sent = upto
            await asyncio.sleep(TICK_S)

    async def reader() -> None:
        for _ in range(n):
            msg = await client.read_message()
            now = time.perf_counter()
            rid = msg.get("id")
            if not isinstance(rid, int) or rid not in due:
                raise BenchFailure(f"unexpected or duplicate id: {stdio_bench.short(msg)}")
            stdio_bench.check_call_result(msg)
            lat.append(now - due.pop(rid))

    async with asyncio.timeout(duration * 5 + 30):
        await asyncio.gather(writer(), reader())
    wall = time.perf_counter() - start
    return make_point(rate, lat, wall, time.process_time() - cpu0, proc_cpu_ticks(client.pid) - ticks0)


# ------------------------------------------------------------------------------------------------ http


def http_call(rid: int) -> bytes:
    params = {"name": "echo", "arguments": {"text": TEXT}}
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}).encode()


async def http_open_loop(port: int, pid: int, session: str, rate: float, duration: float) -> Point:
    n = max(10, int(rate * duration))
    headers = {**LEGACY, "Mcp-Session-Id": session, "MCP-Protocol-Version": LEGACY_VERSION}
    idle: list[RawHTTP] = []
    pending: collections.deque[tuple[int, float]] = collections.deque()
    lat: list[float] = []
    opened: list[RawHTTP] = []
    errors: list[BaseException] = []
    tasks: set[asyncio.Task[None]] = set()
    cpu0 = time.process_time()
    ticks0 = proc_cpu_ticks(pid)
    start = time.perf_counter() + 0.01

    async def work(conn: RawHTTP | None, rid: int, due: float) -> None:
        try:
            if conn is None:
                conn = await RawHTTP.open(port)
                opened.append(conn)
            while True:
                status, _, body = await conn.request("POST", headers, http_call(rid))
                msg = rpc_message(body) if status == 200 else {}
                content = (msg.get("result") or {}).get("content") or [{}]
                if status != 200 or msg.get("id") != rid or content[0].get("text") != TEXT:
                    raise BenchFailure(f"tools/call: HTTP {status} {body[:200]!r}")
                lat.append(time.perf_counter() - due)
                if not pending:
                    idle.append(conn)
                    return
                rid, due = pending.popleft()
        except BaseException as exc:  # reported by the scheduler
            errors.append(exc)

    sent = 0
    try:
        async with asyncio.timeout(duration * 5 + 30):
            while sent < n and not errors:
                now = time.perf_counter()
                upto = min(n, int((now - start) * rate) + 1) if now >= start else 0
                for k in range(sent, upto):
                    item = (k + 1, start + k / rate)
                    if idle:
                        conn: RawHTTP | None = idle.pop()
                    elif len(opened) + sum(1 for t in tasks if not t.done()) < MAX_CONNS:
                        conn = None
                    else:
                        pending.append(item)
                        continue
                    task = asyncio.ensure_future(work(conn, *item))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
                sent = max(sent, upto)
                await asyncio.sleep(TICK_S)
            while len(lat) < n and not errors:  # noqa: ASYNC110 - the workers append, no event to wait on
                await asyncio.sleep(TICK_S)
    finally:
        for conn in opened:
            conn.close()
    if errors:
        raise BenchFailure(f"open loop: {type(errors[0]).__name__}: {errors[0]}")
    wall = time.perf_counter() - start
    return make_point(rate, lat, wall, time.process_time() - cpu0, proc_cpu_ticks(pid) - ticks0)


def http_cell(
    wrk: str, name: str, source: McpkitSource, cfg: Settings, rng: random.Random, cell: Cell
) -> None:
    with tempfile.TemporaryFile() as log, httpx.Client(timeout=10.0) as client:
        server = ServerProcess(ServerSpec(name, peer_env(name, source)), "json", log)
        try:
            server.start()
            session = open_session(client, server.url)
            if cfg.duration_s >= 1:
                run_wrk(wrk, server.url, 16, 1, "legacy", session, server.pid)  # warm-up, checked
            most = run_wrk(wrk, server.url, 16, cfg.max_s, "legacy", session, server.pid)
            cell.max_rps, cell.max_us = most.rps, most.server_cpu_us
            fractions = list(FRACTIONS)
            rng.shuffle(fractions)
            for f in fractions:
                cell.points[f] = arun(
                    http_open_loop(server.port, server.pid, session, f * cell.max_rps, cfg.duration_s)
                )
        except (BenchFailure, httpx.HTTPError, OSError) as exc:
            cell.failures.append(f"http: {exc}{server.log_tail()}")
        finally:
            server.stop()


# ----------------------------------------------------------------------------------------------- bench


@dataclass
class Settings:
    peers: tuple[str, ...]
    transports: tuple[str, ...]
    duration_s: float
    max_s: int
    max_n: int
    seed: int


def bench(wrk: str, cfg: Settings, source: McpkitSource) -> dict[tuple[str, str], Cell]:
    rng = random.Random(cfg.seed)
    order = [(p, t) for p in cfg.peers for t in cfg.transports]
    rng.shuffle(order)
    cells: dict[tuple[str, str], Cell] = {}
    for peer, transport in order:
        cell = cells[(peer, transport)] = Cell()
        t0 = time.perf_counter()
        if transport == "stdio" and peer in STDIO_SCRIPTS:
            asyncio.run(stdio_cell(peer, source, cfg, rng, cell))  # RawClient tunes asyncio pipes
        elif transport == "http" and peer in HTTP_SCRIPTS:
            http_cell(wrk, peer, source, cfg, rng, cell)
        status = (
            "FAILED " + cell.failures[0].splitlines()[0] if cell.failures else f"max {fmt(cell.max_rps)}/s"
        )
        print(
            f"  {peer:9} {transport:5} {time.perf_counter() - t0:5.1f} s {status}",
            file=sys.stderr,
            flush=True,
        )
    return cells


def summary(cells: dict[tuple[str, str], Cell]) -> dict[tuple[str, str, float], float]:
    return {(p, t, f): pt.p99_ms for (p, t), c in cells.items() for f, pt in c.points.items()}


def render_report(
    cells: dict[tuple[str, str], Cell], cfg: Settings, machine: list[str], level: str = "#"
) -> str:
    h2 = level + "#"
    lines = report_head("Latency under load (issue 18 item 4)", machine, level)
    add = lines.append
    for transport in cfg.transports:
        add(f"{h2} {transport}: open-loop `tools/call` at 50% and 90% of each server's maximum")
        add("")
        add(
            "| server | max req/s | load | target req/s | achieved req/s | p50 ms | p99 ms | p99.9 ms "
            "| gen CPU | server CPU | server µs/req (at max) |"
        )
        add("|---|---|---|---|---|---|---|---|---|---|---|")
        for peer in cfg.peers:
            cell = cells.get((peer, transport))
            if cell is None:
                continue
            if not cell.points:
                add(f"| {peer} | {fmt(cell.max_rps)} | - | - | - | - | - | - | - | - | - |")
            for f in FRACTIONS:
                pt = cell.points.get(f)
                if pt is None:
                    continue
                add(
                    f"| {peer} | {fmt(cell.max_rps)} | {f:.0%} | {fmt(pt.target_rps)} | "
                    f"{fmt(pt.achieved_rps)} | {pt.p50_ms:.2f} | {pt.p99_ms:.2f} | {pt.p999_ms:.2f} "
                    f"| {pt.gen_cpu:.0%} | {pt.server_cpu:.0%} | {pt.server_us:.0f} ({fmt(cell.max_us)}) |"
                )
        add("")
        mk = cells.get(("mcpkit", transport))
        if mk is not None and mk.points:
            parts = []
            for peer in cfg.peers[1:]:
                c = cells.get((peer, transport))
                if c is None or not c.points:
                    continue
                theirs = c.points.get(0.9)
                mine = mk.points.get(0.9)
                p99 = ratio(theirs.p99_ms if theirs else None, mine.p99_ms if mine else None)
                parts.append(f"{peer}: max {ratio(mk.max_rps, c.max_rps)}, p99 at 90% {p99} (peer ÷ mcpkit)")
            add("mcpkit vs peers: " + "; ".join(parts) + ".")
            add("")
        add(f"Plot: `docs/img/bench/latency_{transport}.png` (shown in docs/performance.md)")
        add("")
    failures = [(f"{p} {t}", f) for (p, t), c in cells.items() for f in c.failures]
    lines += failures_and_notes(h2, failures, [])
    return "\n".join(lines)


def write_plots(cells: dict[tuple[str, str], Cell], cfg: Settings) -> None:
    for transport in cfg.transports:
        series = {}
        for peer in cfg.peers:
            c = cells.get((peer, transport))
            if c is None or not c.points:
                continue
            for q, get in (("p50", lambda pt: pt.p50_ms), ("p99", lambda pt: pt.p99_ms)):
                series[f"{peer} {q}"] = {int(f * 100): get(pt) for f, pt in c.points.items()}
        if series:
            plot_lines(
                f"latency_{transport}.png",
                f"{transport} tools/call latency, open loop at % of each server's max",
                "load (% of the server's own maximum)",
                "ms",
                series,
                logy=True,
            )


def failed(cells: dict[tuple[str, str], Cell]) -> bool:
    return any(c.failures for (p, _), c in cells.items() if p in ("mcpkit", "official"))


def make_settings(smoke: bool, seed: int | None, peers: Sequence[str] | None = None) -> Settings:
    return Settings(
        peers=tuple(peers or (("mcpkit", "official") if smoke else PEERS)),
        transports=TRANSPORTS,
        duration_s=0.5 if smoke else 3.0,
        max_s=1 if smoke else 3,
        max_n=200 if smoke else 1000,
        seed=seed if seed is not None else random.randrange(2**32),
    )


def info_lines(cfg: Settings, wrk: str) -> list[str]:
    return [
        f"max: stdio batches of {cfg.max_n:,} pipelined calls for {cfg.max_s} s; "
        f"HTTP `{wrk_version(wrk)}` `wrk -t1 -c16 -d{cfg.max_s}s` "
        "(legacy session, JSON); open loop: one Python process on uvloop "
        f"({TICK_S * 1e3:g} ms ticks; HTTP pool of at most {MAX_CONNS} keep-alive connections), "
        f"-d{cfg.duration_s:g}s per load; one repetition, shuffle seed {cfg.seed}",
        "`server CPU`: the server process's CPU (utime + stime from `/proc`) over the load's wall time; "
        "`server µs/req`: its CPU per answered request at that load, and in brackets while its maximum "
        "was measured (requests arriving together share a wake-up of the server; arriving one by one, "
        "each pays its own: a server near 100% at 90% load is at its open-loop capacity)",
    ]


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--smoke", action="store_true", help="mcpkit/official, -d1s, nothing written")
    p.add_argument("--peers", nargs="+", choices=PEERS, default=None)
    p.add_argument("--transports", nargs="+", choices=TRANSPORTS, default=None)
    add_run_options(p, install=True)
    a = p.parse_args(argv)
    cfg = make_settings(a.smoke, a.seed, a.peers)
    cfg.transports = tuple(a.transports or cfg.transports)
    wrk, wrk_notes = ensure_wrk()
    setup = setup_peers(cfg.peers, install=not a.no_install)
    cfg.peers = tuple(x for x in cfg.peers if x in setup.available)
    source = mcpkit_source(snapshot=not a.live_source)
    load_before = load_average()
    try:
        cells = bench(wrk, cfg, source)
    finally:
        source.cleanup()
    machine = [
        *machine_lines(),
        *info_lines(cfg, wrk),
        *setup.lines(),
        *wrk_notes,
        f"load average before: {load_before}; after: {load_average()}",
    ]
    report = render_report(cells, cfg, machine)
    if not a.smoke and not a.no_write:
        write_plots(cells, cfg)
    return finish(
        report, failed(cells), write=not a.smoke and not a.no_write, section=SECTION, label="latency"
    )


if __name__ == "__main__":
    sys.exit(main())
