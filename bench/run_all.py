"""``make bench``: every benchmark in one run, and the whole of ``bench/RESULTS.md``.

Phases (each interleaves its peers in shuffled order within every repetition and reports medians):

1. ``stdio``   - ``stdio_bench.py``: raw client, sequential and pipelined ``tools/call`` (all peers);
2. ``http``    - ``http_bench.py``: Streamable HTTP with wrk at c=1/16/64, legacy JSON, legacy SSE, modern;
3. ``startup`` - ``startup_bench.py``: import time, cold start (spawn -> initialize answer), idle RSS;
4. ``growth``  - ``growth_bench.py``: mcpkit's RSS growth over 100,000 calls in each mode;
5. ``client``  - ``client_bench.py``: mcpkit ``Client`` -> mcpkit vs ``mcp.Client`` -> official;
6. ``scale``   - ``scale_bench.py``: ``mcpkit run --workers N --redis URL`` at 1, 2, 4 workers (mcpkit only,
   modern stateless and legacy session requests; needs Redis, else starts a private ``redis-server``).
7. ``middleware`` - ``middleware_bench.py``: mcpkit's stdio server plain, through a pass-through hook,
   with ``RateLimit`` + ``AccessLog``, and with tracing off and on (ratios to plain in the same run).
8. ``proxy``   - ``proxy_bench.py``: 100 ``tools/call`` through ``MCPServer.proxy`` vs 100 direct ones
   (stdio backend; wall and CPU time; target: proxied at most 1.5x direct).
9. ``connections`` - ``connections_bench.py``: wrk at 1-1,000 connections, memory per idle legacy session
   (10,000) and per open GET / ``subscriptions/listen`` stream (1,000), change fan-out; with/without Redis.
10. ``latency`` - ``latency_bench.py``: open-loop ``tools/call`` p50/p99/p99.9 at 50% and 90% of each
   server's measured maximum, stdio and HTTP.
11. ``payload`` - ``payload_bench.py``: ``tools/call`` and ``resources/read`` of 1 KiB - 16 MiB (text and
   blob), stdio / HTTP JSON / HTTP SSE: latency, throughput, peak RSS of server and client.
12. ``registry`` - ``registry_bench.py``: 10 - 10,000 tools, resources and templates: paged ``tools/list``,
   dispatch, template matching, start-up and RSS.

Peers (``peers.py``): mcpkit, official (``mcp``), fastmcp (own venv, installed on first use), ts-sdk (npm,
into ``.cache/bench-node``, installed on first use), floor-py, floor-node. Every mcpkit process in the run
imports one byte-compiled copy of ``src/mcpkit`` taken at the start. The report starts with a "Targets"
table (the targets of the performance issue, met or not), then each phase's section between markers, so
that a later standalone run of one phase script replaces only its own section.

Usage::

    python bench/run_all.py                  # full run (about 12-15 min on the 2-vCPU machine)
    python bench/run_all.py --smoke          # every phase at toy sizes, mcpkit/official/floor-py only,
                                             # nothing written (part of `make test`, via `make bench-smoke`)
    python bench/run_all.py --phases stdio http --http-duration 5

The exit status is non-zero when a server fails to answer correctly; a missed target is not a failure.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import random
import re
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import client_bench
import connections_bench
import growth_bench
import http_bench
import latency_bench
import middleware_bench
import payload_bench
import proxy_bench
import registry_bench
import scale_bench
import startup_bench
import stdio_bench
from common import (
    RESULTS_PATH,
    add_loop_option,
    fmt,
    load_1min,
    load_average,
    machine_lines,
    mcpkit_source,
    versions_line,
    wrap_section,
)
from peers import ALL_PEERS, CORE_PEERS, setup_peers

PHASES = (
    "stdio",
    "http",
    "startup",
    "growth",
    "client",
    "scale",
    "middleware",
    "proxy",
    "connections",
    "latency",
    "payload",
    "registry",
)
MAIN_PACKAGES = (
    "mcp",
    "mcp-types",
    "pydantic",
    "uvicorn",
    "h11",
    "httptools",
    "anyio",
    "orjson",
    "msgspec",
    "httpx",
)
PARTIAL_PATH = RESULTS_PATH.parent / "out" / "RESULTS.partial.md"  # runs of only some phases (git-ignored)
HIGH_LOAD = 3.0  # 1-min load average above this on the 2-vCPU machine: say the numbers are suspect


@dataclass
class Config:
    smoke: bool
    peers: list[str]
    phases: list[str]
    seed: int
    stdio_n: int
    stdio_reps: int
    http_duration: int
    http_warmup: int
    http_reps: int
    http_conns: tuple[int, ...]
    http_modes: tuple[str, ...]
    startup_reps: int
    growth_calls: int
    growth_modes: tuple[str, ...]
    client_n: int
    client_reps: int
    scale: scale_bench.Settings  # its redis_url is replaced by the one found (or started) at run time
    scale_redis_url: str | None


@dataclass
class PhaseRecord:
    name: str
    seconds: float = 0.0
    load_before: str = ""
    load_after: str = ""
    section: str = ""
    failed: bool = False
    error: str = ""
    data: Any = None


@dataclass
class Run:
    cfg: Config
    phases: dict[str, PhaseRecord] = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------- phases


def _stdio_settings(cfg: Config) -> stdio_bench.Settings:
    return stdio_bench.Settings(
        n=cfg.stdio_n,
        reps=cfg.stdio_reps,
        timeout_s=10.0 + 0.01 * cfg.stdio_n,
        handshake_timeout_s=30.0,
        client_read_size=stdio_bench.DEFAULT_CLIENT_READ_KIB * 1024,
        seed=cfg.seed,
        warmup=stdio_bench.WARMUP_MIN if cfg.smoke else stdio_bench.WARMUP_CALLS,
        warmup_s=0.0 if cfg.smoke else stdio_bench.WARMUP_S,
    )


def phase_stdio(cfg: Config, peers: list[str], source: Any, wrk: str | None) -> tuple[str, Any, bool]:
    settings = _stdio_settings(cfg)
    specs = stdio_bench.server_specs(peers, source)
    stats = asyncio.run(stdio_bench.bench(specs, settings))
    machine = [stdio_bench.config_line(settings)]
    report = stdio_bench.render_report(
        stats,
        settings.n,
        settings.reps,
        machine,
        title_level="##",
        warmup=settings.warmup,
        warmup_s=settings.warmup_s,
    )
    failed = any(s.failures for s in stats.values())
    return report, stdio_bench.summary(stats, settings.n), failed


def phase_http(cfg: Config, peers: list[str], source: Any, wrk: str | None) -> tuple[str, Any, bool]:
    assert wrk is not None
    settings = http_bench.Settings(
        duration_s=cfg.http_duration,
        warmup_s=cfg.http_warmup,
        reps=cfg.http_reps,
        conns=cfg.http_conns,
        modes=cfg.http_modes,
        seed=cfg.seed,
    )
    specs = http_bench.server_specs(peers, source)
    stats = http_bench.bench(wrk, specs, settings)
    names = [s.name for s in specs]
    machine = [
        http_bench.config_line(settings),
        f"load generator: `wrk -t1 -cC -dDs --timeout {http_bench.WRK_TIMEOUT} -s bench/wrk_mcp_call.lua "
        "http://127.0.0.1:PORT/mcp -- ERA SESSION`",
    ]
    report = http_bench.render_report(stats, settings, machine, names, title_level="##")
    return report, http_bench.summary(stats), http_bench.failed(stats, settings)


def phase_startup(cfg: Config, peers: list[str], source: Any, wrk: str | None) -> tuple[str, Any, bool]:
    stats = startup_bench.bench(peers, source, cfg.startup_reps, cfg.seed)
    machine = [f"reps={cfg.startup_reps}"]
    report = startup_bench.render_report(stats, peers, cfg.startup_reps, machine, title_level="##")
    return report, startup_bench.summary(stats), bool(stats.failures)


def phase_growth(cfg: Config, peers: list[str], source: Any, wrk: str | None) -> tuple[str, Any, bool]:
    stats = growth_bench.bench(wrk, ["mcpkit"], cfg.growth_modes, cfg.growth_calls, source, cfg.seed)
    machine = [f"calls per mode {cfg.growth_calls:,}; mcpkit only (see the method below)"]
    report = growth_bench.render_report(
        stats, ["mcpkit"], cfg.growth_modes, cfg.growth_calls, machine, title_level="##"
    )
    return report, stats, bool(stats.failures)


def phase_client(cfg: Config, peers: list[str], source: Any, wrk: str | None) -> tuple[str, Any, bool]:
    stats = client_bench.bench(client_bench.KINDS, cfg.client_n, cfg.client_reps, source, cfg.seed)
    machine = [f"N={cfg.client_n}, reps={cfg.client_reps}"]
    report = client_bench.render_report(stats, cfg.client_n, cfg.client_reps, machine, title_level="##")
    return report, client_bench.summary(stats, cfg.client_n), any(s.failures for s in stats.values())


def phase_scale(cfg: Config, peers: list[str], source: Any, wrk: str | None) -> tuple[str, Any, bool]:
    assert wrk is not None
    scale_cfg, cells, info = scale_bench.run(
        wrk, lambda url: dataclasses.replace(cfg.scale, redis_url=url), cfg.scale_redis_url, source
    )
    report = scale_bench.render_report(cells, scale_cfg, info, title_level="##")
    return report, scale_bench.summary(cells), scale_bench.failed(cells, scale_cfg)


def phase_middleware(cfg: Config, peers: list[str], source: Any, wrk: str | None) -> tuple[str, Any, bool]:
    settings = _stdio_settings(cfg)
    stats = asyncio.run(stdio_bench.bench(middleware_bench.specs(source), settings))
    report = middleware_bench.render(stats, settings.n, settings.reps, [stdio_bench.config_line(settings)])
    return report, middleware_bench.ratios(stats, settings.n), any(s.failures for s in stats.values())


def phase_proxy(cfg: Config, peers: list[str], source: Any, wrk: str | None) -> tuple[str, Any, bool]:
    reps = 1 if cfg.smoke else 7
    # (smoke: without the session-per-call row, which spawns a backend per call)
    kinds = proxy_bench.KINDS[:-1] if cfg.smoke else proxy_bench.KINDS
    stats = proxy_bench.bench(proxy_bench.N, reps, cfg.seed, source, kinds)
    report = proxy_bench.render(stats, proxy_bench.N, reps, [f"N={proxy_bench.N}, reps={reps}"])
    return report, proxy_bench.summary(stats), bool(stats.failures)


def phase_connections(cfg: Config, peers: list[str], source: Any, wrk: str | None) -> tuple[str, Any, bool]:
    assert wrk is not None
    rows = [r for r in connections_bench.ALL_ROWS if r in connections_bench.MCPKIT_ROWS or r in peers]
    settings = connections_bench.make_settings(cfg.smoke, cfg.seed, rows)
    results, info = connections_bench.run(wrk, settings, source, cfg.scale_redis_url)
    if not cfg.smoke:
        connections_bench.write_plots(results, settings)
    report = connections_bench.render_report(results, settings, info, level="##")
    return report, connections_bench.summary(results), connections_bench.failed(results)


def phase_latency(cfg: Config, peers: list[str], source: Any, wrk: str | None) -> tuple[str, Any, bool]:
    assert wrk is not None
    settings = latency_bench.make_settings(
        cfg.smoke, cfg.seed, [p for p in latency_bench.PEERS if p in peers]
    )
    cells = latency_bench.bench(wrk, settings, source)
    if not cfg.smoke:
        latency_bench.write_plots(cells, settings)
    report = latency_bench.render_report(cells, settings, latency_bench.info_lines(settings, wrk), level="##")
    return report, latency_bench.summary(cells), latency_bench.failed(cells)


def phase_payload(cfg: Config, peers: list[str], source: Any, wrk: str | None) -> tuple[str, Any, bool]:
    settings = payload_bench.settings(cfg.smoke, peers, cfg.seed)
    stats = payload_bench.bench(settings, source)
    report = payload_bench.render_report(
        stats, settings, [payload_bench.config_line(settings)], title_level="##"
    )
    return report, payload_bench.summary(stats), payload_bench.failed(stats)


def phase_registry(cfg: Config, peers: list[str], source: Any, wrk: str | None) -> tuple[str, Any, bool]:
    names = [p for p in (payload_bench.SMOKE_PEERS if cfg.smoke else payload_bench.PEERS) if p in peers]
    sizes = registry_bench.SMOKE_SIZES if cfg.smoke else registry_bench.SIZES
    stats = registry_bench.bench(names, sizes, 1, cfg.seed, source, cfg.smoke)
    report = registry_bench.render_report(
        stats, names, sizes, 1, [f"reps=1, seed {cfg.seed}"], title_level="##", plot=not cfg.smoke
    )
    return report, registry_bench.summary(stats, sizes), bool(stats.failures)


PHASE_FUNCS: dict[str, Callable[[Config, list[str], Any, str | None], tuple[str, Any, bool]]] = {
    "stdio": phase_stdio,
    "http": phase_http,
    "startup": phase_startup,
    "growth": phase_growth,
    "client": phase_client,
    "scale": phase_scale,
    "middleware": phase_middleware,
    "proxy": phase_proxy,
    "connections": phase_connections,
    "latency": phase_latency,
    "payload": phase_payload,
    "registry": phase_registry,
}
SECTION_NAMES = {
    "stdio": stdio_bench.SECTION,
    "http": http_bench.SECTION,
    "startup": startup_bench.SECTION,
    "growth": growth_bench.SECTION,
    "client": client_bench.SECTION,
    "scale": scale_bench.SECTION,
    "middleware": middleware_bench.SECTION,
    "proxy": proxy_bench.SECTION,
    "connections": connections_bench.SECTION,
    "latency": latency_bench.SECTION,
    "payload": payload_bench.SECTION,
    "registry": registry_bench.SECTION,
}


# --------------------------------------------------------------------------------------------- targets


@dataclass(frozen=True)
class Target:
    label: str
    mcpkit: float | None
    peer_label: str
    peer: float | None
    value: float | None  # the quantity the requirement is about
    requirement: str
    met: bool | None
    unit: str = ""


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def targets(run: Run) -> list[Target]:
    out: list[Target] = []
    ph = run.phases

    def data(name: str) -> Any:
        rec = ph.get(name)
        return rec.data if rec is not None else None

    def at_least(x: float | None, need: float) -> bool | None:
        return None if x is None else x >= need

    def at_most(x: float | None, need: float) -> bool | None:
        return None if x is None else x <= need

    stdio = data("stdio") or {}
    mk = stdio.get("mcpkit", {})
    for peer, need in (("official", 10.0), ("ts-sdk", 2.5)):
        r = _ratio(mk.get("seq"), stdio.get(peer, {}).get("seq"))
        out.append(
            Target(
                f"stdio sequential `tools/call` ≥ {need:g}x {peer}",
                mk.get("seq"),
                f"{peer} calls/s",
                stdio.get(peer, {}).get("seq"),
                r,
                f"mcpkit ÷ {peer} ≥ {need:g}",
                at_least(r, need),
                "calls/s",
            )
        )
    floor = stdio.get("floor-py", {}).get("seq")
    r = _ratio(floor, mk.get("seq"))
    out.append(
        Target(
            "stdio sequential within 1.6x of the floor",
            mk.get("seq"),
            "floor-py calls/s",
            floor,
            r,
            "floor-py ÷ mcpkit ≤ 1.6",
            at_most(r, 1.6),
            "calls/s",
        )
    )
    r = _ratio(mk.get("pipe"), stdio.get("ts-sdk", {}).get("pipe"))
    out.append(
        Target(
            "stdio pipelined ≥ 3x ts-sdk",
            mk.get("pipe"),
            "ts-sdk req/s",
            stdio.get("ts-sdk", {}).get("pipe"),
            r,
            "mcpkit ÷ ts-sdk ≥ 3",
            at_least(r, 3.0),
            "req/s",
        )
    )
    http = data("http") or {}
    mk_http = http.get(("mcpkit", "json", 16))
    for peer, need in (("official", 4.0), ("ts-sdk", 1.2)):
        other = http.get((peer, "json", 16))
        r = _ratio(mk_http, other)
        out.append(
            Target(
                f"HTTP legacy JSON, c=16: ≥ {need:g}x {peer}",
                mk_http,
                f"{peer} req/s",
                other,
                r,
                f"mcpkit ÷ {peer} ≥ {need:g}",
                at_least(r, need),
                "req/s",
            )
        )
    startup = data("startup") or {}
    smk, sof = startup.get("mcpkit", {}), startup.get("official", {})
    r = _ratio(smk.get("cold"), sof.get("cold"))
    out.append(
        Target(
            "cold start (spawn -> initialize answer) ≤ 1/5 of official",
            smk.get("cold"),
            "official ms",
            sof.get("cold"),
            r,
            "mcpkit ÷ official ≤ 0.20",
            at_most(r, 0.2),
            "ms",
        )
    )
    r = _ratio(smk.get("rss"), sof.get("rss"))
    out.append(
        Target(
            "idle RSS ≤ 1/2 of official",
            smk.get("rss"),
            "official MiB",
            sof.get("rss"),
            r,
            "mcpkit ÷ official ≤ 0.50",
            at_most(r, 0.5),
            "MiB",
        )
    )
    growth = data("growth")
    if growth is not None:
        for mode in run.cfg.growth_modes:
            res = growth.results.get(("mcpkit", mode))
            g = res.growth_mib if res is not None else None
            out.append(
                Target(
                    f"RSS growth over {run.cfg.growth_calls:,} calls, `{mode}`, < 5 MiB",
                    g,
                    "",
                    None,
                    g,
                    "growth < 5 MiB",
                    None if g is None else g < growth_bench.TARGET_MIB,
                    "MiB",
                )
            )
    client = data("client") or {}
    cm, co = client.get("mcpkit", {}), client.get("official", {})
    r = _ratio(cm.get("seq"), co.get("seq"))
    out.append(
        Target(
            "client -> server (stdio, sequential): mcpkit ≥ 10x official",
            cm.get("seq"),
            "official calls/s",
            co.get("seq"),
            r,
            "mcpkit ÷ official ≥ 10",
            at_least(r, 10.0),
            "calls/s",
        )
    )
    r = _ratio(cm.get("pipe"), co.get("pipe"))
    out.append(
        Target(
            "client -> server (stdio, pipelined with gather): mcpkit ≥ 10x official",
            cm.get("pipe"),
            "official calls/s",
            co.get("pipe"),
            r,
            "mcpkit ÷ official ≥ 10",
            at_least(r, 10.0),
            "calls/s",
        )
    )
    middleware = data("middleware") or {}
    plain = middleware.get("plain", {})
    for variant, least, label in middleware_bench.TARGETS:
        row = middleware.get(variant, {})
        r = row.get("pipe_ratio")
        out.append(
            Target(
                f"stdio pipelined: {label}",
                row.get("pipe"),
                "plain req/s",
                plain.get("pipe"),
                r,
                f"{variant} ÷ plain ≥ {least:g}",
                at_least(r, least),
                "req/s",
            )
        )
    proxy = data("proxy") or {}
    r = proxy.get("ratio")
    out.append(
        Target(
            f"{proxy_bench.N} proxied `tools/call` ≤ {proxy_bench.TARGET:g}x {proxy_bench.N} direct",
            proxy.get("proxied"),
            "direct ms",
            proxy.get("direct"),
            r,
            f"proxied ÷ direct ≤ {proxy_bench.TARGET:g}",
            at_most(r, proxy_bench.TARGET),
            "ms",
        )
    )
    conn = data("connections") or {}
    kib = conn.get("session_kib", {})
    r = _ratio(kib.get("mcpkit"), kib.get("official"))
    out.append(
        Target(
            "idle legacy session memory ≤ 1/4 of official",
            kib.get("mcpkit"),
            "official KiB",
            kib.get("official"),
            r,
            "mcpkit ÷ official ≤ 0.25",
            at_most(r, 0.25),
            "KiB",
        )
    )
    for kind in ("listen", "get"):
        last = conn.get("fanout_ms", {}).get("mcpkit", {}).get(kind)
        out.append(
            Target(
                f"one change to every open {kind} stream (1,000 in the full run), one worker, < 100 ms "
                "(the worst of the run's fan-outs)",
                None if last is None else last[1],
                "",
                None,
                None if last is None else last[1],
                "time to the last stream, max over the fan-outs, < 100 ms",
                None if last is None else last[1] < 100.0,
                "ms",
            )
        )
    payload = data("payload") or {}
    for side in ("server", "client"):
        x = payload.get((f"{side}_x", "mcpkit"))
        out.append(
            Target(
                f"{payload.get('size', '16 MiB')} payload: {side} peak extra RSS < 3x the payload "
                "(worst transport and kind)",
                x,
                "",
                None,
                x,
                "peak extra ÷ payload < 3",
                None if x is None else x < 3.0,
                "x",
            )
        )
    registry = data("registry") or {}
    lo, hi = registry.get("dispatch_small"), registry.get("dispatch_large")
    r = _ratio(hi, lo)
    sizes = registry.get("sizes") or (10, 10_000)
    out.append(
        Target(
            f"dispatch with {sizes[1]:,} tools within 10% of {sizes[0]:,}",
            hi,
            f"N={sizes[0]:,} µs",
            lo,
            r,
            "ratio ≤ 1.10",
            at_most(r, 1.10),
            "µs",
        )
    )
    return out


def render_targets(items: list[Target]) -> str:
    lines = [
        "| target | mcpkit | peer | ratio / value | requirement | met |",
        "|---|---|---|---|---|---|",
    ]
    for t in items:
        digits = 1 if t.unit in ("ms", "MiB", "x") else 0
        mine = f"{fmt(t.mcpkit, digits if t.unit != 'MiB' or t.peer is not None else 2)} {t.unit}".strip()
        peer = f"{fmt(t.peer, digits)} ({t.peer_label})" if t.peer_label else "-"
        if t.peer_label:
            value = "n/a" if t.value is None else f"{t.value:.2f}x"
        else:
            if t.value is None:
                value = "n/a"
            else:
                value = f"{t.value:+.2f} MiB" if t.unit == "MiB" else f"{t.value:.1f} {t.unit}"
        met = "n/a (not measured)" if t.met is None else ("**yes**" if t.met else "**NO**")
        lines.append(f"| {t.label} | {mine} | {peer} | {value} | {t.requirement} | {met} |")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------- report


NOTES = re.compile(r"<!-- notes: begin.*?<!-- notes: end -->\n", re.S)


def carried_notes(path: Path = RESULTS_PATH) -> str:
    """The hand-written notes of the current RESULTS.md, carried over into the new one."""
    match = NOTES.search(path.read_text()) if path.exists() else None
    return match.group(0) if match else ""


def render(run: Run, header: list[str], items: list[Target], notes: str = "") -> str:
    lines: list[str] = []
    add = lines.append
    add("# mcpkit benchmark results")
    add("")
    add(
        "<!-- Generated by `make bench` (bench/run_all.py). Each phase section below is also replaced by a "
        "standalone run of its script. -->"
    )
    add("")
    for item in header:
        add(f"- {item}")
    add("")
    add("## Targets")
    add("")
    add(
        "The performance issue's targets, judged on the medians of this run (ratios of medians measured in "
        "the same run, interleaved). A `NO` on a noisy machine can flip between runs when the margin is "
        "small: see the per-repetition figures in each section."
    )
    add("")
    add(render_targets(items))
    met = sum(1 for t in items if t.met)
    known = sum(1 for t in items if t.met is not None)
    add("")
    add(f"{met} of {known} measured targets met.")
    add("")
    if notes:
        add(notes)
    add("## Phases")
    add("")
    add("| phase | wall s | load avg before (1/5/15) | load avg after | status |")
    add("|---|---|---|---|---|")
    for name, rec in run.phases.items():
        status = "ok" if not rec.failed else f"FAILED {rec.error.splitlines()[0][:100] if rec.error else ''}"
        add(f"| {name} | {rec.seconds:.0f} | {rec.load_before} | {rec.load_after} | {status} |")
    add("")
    for name, rec in run.phases.items():
        if rec.section:
            add(wrap_section(SECTION_NAMES[name], rec.section))
    return "\n".join(lines).rstrip() + "\n"


# ------------------------------------------------------------------------------------------------ main


def parse_args(argv: Sequence[str] | None) -> Config:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--smoke", action="store_true", help="toy sizes, core peers, nothing written")
    p.add_argument("--phases", nargs="+", choices=PHASES, default=None, help="default: all")
    p.add_argument("--peers", nargs="+", choices=ALL_PEERS, default=None, help="default: all (smoke: core)")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--stdio-n", type=int, default=None, help="calls per stdio phase (2000)")
    p.add_argument("--stdio-reps", type=int, default=None, help="stdio repetitions (5)")
    p.add_argument("--http-duration", type=int, default=None, help="seconds per wrk run (2)")
    p.add_argument("--http-reps", type=int, default=None, help="HTTP repetitions (3)")
    p.add_argument("--startup-reps", type=int, default=None, help="start-up repetitions (5)")
    p.add_argument("--growth-calls", type=int, default=None, help="calls per growth mode (100000)")
    p.add_argument("--client-n", type=int, default=None, help="calls per client phase (1000)")
    p.add_argument("--client-reps", type=int, default=None, help="client repetitions (5)")
    p.add_argument("--scale-reps", type=int, default=None, help="scale-out repetitions (3)")
    p.add_argument("--redis-url", default=None, help="Redis for the scale phase (default: scale_bench's)")
    add_loop_option(p)
    a = p.parse_args(argv)
    smoke = a.smoke

    def pick(value: int | None, full: int, toy: int) -> int:
        return value if value is not None else (toy if smoke else full)

    seed = a.seed if a.seed is not None else random.randrange(2**32)
    return Config(
        smoke=smoke,
        peers=list(a.peers or (CORE_PEERS if smoke else ALL_PEERS)),
        phases=list(a.phases or PHASES),
        seed=seed,
        stdio_n=pick(a.stdio_n, 2000, 100),
        stdio_reps=pick(a.stdio_reps, 5, 1),
        http_duration=pick(a.http_duration, 2, 1),
        http_warmup=0 if smoke else 2,
        http_reps=pick(a.http_reps, 3, 1),
        http_conns=(16,) if smoke else (1, 16, 64),
        http_modes=("json",) if smoke else ("json", "sse", "modern"),
        startup_reps=pick(a.startup_reps, 5, 1),
        growth_calls=pick(a.growth_calls, 100_000, 1_000),
        growth_modes=("stdio-seq", "stdio-pipe", "http-json") if smoke else growth_bench.MODES,
        client_n=pick(a.client_n, 1000, 100),
        client_reps=pick(a.client_reps, 5, 1),
        scale=scale_bench.make_settings(
            smoke=smoke, redis_url="", reps=a.scale_reps, seed=seed, duration=1 if smoke else 3
        ),
        scale_redis_url=a.redis_url,
    )


def main(argv: Sequence[str] | None = None) -> int:
    cfg = parse_args(argv)
    t_start = time.perf_counter()
    load_before = load_average()
    print(f"load average before: {load_before}", file=sys.stderr, flush=True)
    setup = setup_peers(cfg.peers)
    wrk, wrk_notes = (None, [])
    if {"http", "growth", "scale", "connections", "latency"} & set(cfg.phases):
        wrk, wrk_notes = http_bench.ensure_wrk()
    source = mcpkit_source()
    run = Run(cfg)
    try:
        for name in cfg.phases:
            rec = PhaseRecord(name, load_before=load_average())
            print(f"== phase {name} (load {rec.load_before})", file=sys.stderr, flush=True)
            t0 = time.perf_counter()
            try:
                rec.section, rec.data, rec.failed = PHASE_FUNCS[name](cfg, setup.available, source, wrk)
            except Exception as exc:  # one broken phase must not lose the others' results
                rec.failed = True
                rec.error = f"{type(exc).__name__}: {exc}"
                traceback.print_exc()
            rec.seconds = time.perf_counter() - t0
            rec.load_after = load_average()
            run.phases[name] = rec
            print(f"== phase {name}: {rec.seconds:.0f} s", file=sys.stderr, flush=True)
    finally:
        source.cleanup()
    elapsed = time.perf_counter() - t_start
    load_after = load_average()
    busy = load_1min() > HIGH_LOAD or any(
        float(rec.load_before.split(" / ")[0]) > HIGH_LOAD for rec in run.phases.values()
    )
    header = [
        *machine_lines(),
        f"packages (main venv): {versions_line(MAIN_PACKAGES)}",
        f"mcpkit: {source.note}",
        *setup.lines(),
        *([http_bench.wrk_version(wrk) + " (load generator, `wrk -t1`)"] if wrk is not None else []),
        *wrk_notes,
        "commands: `make bench` = `python bench/run_all.py`; phases standalone: "
        "`python bench/stdio_bench.py`, `bench/http_bench.py`, `bench/startup_bench.py`, "
        "`bench/growth_bench.py`, `bench/client_bench.py`, `bench/scale_bench.py` (each with `--help`)",
        f"shuffle seed {cfg.seed}; total wall time {elapsed / 60:.1f} min",
        f"load average (1/5/15 min) before: {load_before}; after: {load_after}"
        + (
            f" — **the machine was busy** (1-min load above {HIGH_LOAD:g} on 2 vCPUs during the run; other "
            "sessions run tests here), so absolute numbers are low and noisy; the ratios come from "
            "interleaved runs and suffer less"
            if busy
            else ""
        ),
    ]
    items = targets(run)
    report = render(run, header, items, carried_notes())
    failed = any(rec.failed for rec in run.phases.values())
    if cfg.smoke:
        print(render_targets(items))
        print(f"\nsmoke run of every phase done in {elapsed:.0f} s (nothing written)", file=sys.stderr)
    else:
        out = RESULTS_PATH if set(cfg.phases) == set(PHASES) else PARTIAL_PATH
        out.parent.mkdir(exist_ok=True)
        out.write_text(report)
        print(render_targets(items))
        print(f"\nwrote {out} in {elapsed / 60:.1f} min", file=sys.stderr)
    if failed:
        print("FAILED: " + ", ".join(n for n, r in run.phases.items() if r.failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
