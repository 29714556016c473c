"""Benchmark of stdio ``tools/call`` round trips: mcpkit vs its peers and the floors.

Method (docs: /work/shared/docs/performance-anchors.md, sections 1-2 and 4):

* Peers (``bench/peers.py``), each serving one tool ``echo(text: str) -> str`` from ``bench/servers/``:
  mcpkit, the official Python SDK (``mcp``), FastMCP (own venv), the TypeScript SDK (node), and the
  hand-written floors ``floor-py`` (orjson) and ``floor-node`` (``JSON.parse``/``JSON.stringify``).
* One neutral raw client (this file) spawns each server over asyncio subprocess pipes and writes
  newline-delimited JSON-RPC by hand with orjson: ``initialize`` (protocol 2025-11-25) +
  ``notifications/initialized`` + one ``tools/list``; 50 untimed warm-up calls; N sequential
  ``tools/call`` round trips (timed); N pipelined requests (all written, then all responses read; timed).
  Every response is checked (id and echoed text); a wrong answer fails the run.
* Cold start: spawn -> ``initialize`` response. Server CPU per call from ``/proc/PID/stat``
  (utime+stime) over each timed phase. Idle memory (VmRSS/VmHWM from ``/proc/PID/status``) after
  ``initialize`` + ``tools/list`` + 0.2 s, and VmHWM at the end.
* Every repetition runs every server once, in shuffled order; every figure is a median over repetitions.
* mcpkit is imported from a byte-compiled copy of ``src/mcpkit`` taken at the start
  (``common.mcpkit_source``).

Usage::

    python bench/stdio_bench.py                 # full: all peers, N=2000, 5 reps; writes its section of
                                                # bench/RESULTS.md (make bench writes the whole file)
    python bench/stdio_bench.py --reps 3 --n 1000 --peers mcpkit ts-sdk
    python bench/stdio_bench.py --smoke         # quick check: mcpkit/official/floor-py, N=100, 1 rep

The exit status is non-zero if any server fails to answer correctly (or at all, within the timeout).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

import orjson
from common import (
    CLK_TCK,
    RESULTS_PATH,
    TEXT,
    BenchFailure,
    McpkitSource,
    add_run_options,
    failures_and_notes,
    fmt,
    load_average,
    machine_lines,
    mcpkit_source,
    package_version,
    proc_cpu_ticks,
    proc_status_kib,
    ratio,
    report_head,
    write_section,
)
from peers import ALL_PEERS, CORE_PEERS, KNOWN_PEERS, peer_env, setup_peers, stdio_argv

SECTION = "stdio_bench"
PROTOCOL_VERSION = "2025-11-25"
TOOL_NAME = "echo"
# Warm-up: sequential calls until WARMUP_CALLS are done or WARMUP_S have passed, whichever comes first (at
# least WARMUP_MIN). The TS SDK needs a few thousand calls before V8 has optimised its hot paths: after 50
# warm-up calls it measured ~2.8k calls/s here, after 5,000 ~5k. The Python servers do not warm up further;
# the cap in seconds keeps the slow ones from spending long on it.
WARMUP_CALLS = 5000
WARMUP_S = 2.0
WARMUP_MIN = 50
IDLE_SETTLE_S = 0.2
CLOSE_TIMEOUT_S = 5.0  # grace period for a clean exit after stdin EOF
FAILED_CLOSE_TIMEOUT_S = 0.5  # the same after a failure, before the kill
READ_LIMIT = 16 * 1024 * 1024
# asyncio reads a pipe 256 KiB at a time. glibc serves a buffer that large with mmap, so every read
# also pays mmap + mremap + munmap and a page fault (~15 µs per read measured on the 2-vCPU dev VM, against
# ~1.4 µs for 64 KiB). The client reads 64 KiB at a time so that its own overhead stays small next to
# the floor; ``--client-read-kib 256`` restores asyncio's default (the anchors' raw client).
DEFAULT_CLIENT_READ_KIB = 64


# --------------------------------------------------------------------------------------------- servers


@dataclass(frozen=True)
class ServerSpec:
    name: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)


def server_specs(peers: Sequence[str], source: McpkitSource) -> list[ServerSpec]:
    return [ServerSpec(name, stdio_argv(name), peer_env(name, source)) for name in peers]


# --------------------------------------------------------------------------------------------- client


def call_bytes(request_id: int) -> bytes:
    return (
        orjson.dumps(
            {
                "jsonrpc": "2.0",
                "id": request_id,
                "method": "tools/call",
                "params": {"name": TOOL_NAME, "arguments": {"text": TEXT}},
            }
        )
        + b"\n"
    )


def check_call_result(msg: dict[str, Any]) -> None:
    result = msg.get("result")
    if not isinstance(result, dict):
        raise BenchFailure(f"tools/call id={msg.get('id')}: no result: {short(msg)}")
    content = result.get("content")
    if (
        not isinstance(content, list)
        or len(content) != 1
        or not isinstance(content[0], dict)
        or content[0].get("type") != "text"
        or content[0].get("text") != TEXT
        or result.get("isError", False) is not False
    ):
        raise BenchFailure(f"tools/call id={msg.get('id')}: wrong result: {short(msg)}")


def short(obj: object, limit: int = 400) -> str:
    text = obj.decode(errors="replace") if isinstance(obj, bytes) else repr(obj)
    return text if len(text) <= limit else text[:limit] + "..."


def set_read_size(proc: asyncio.subprocess.Process, size: int) -> None:
    """Make the event loop read the child's stdout ``size`` bytes at a time (see DEFAULT_CLIENT_READ_KIB)."""
    transport = getattr(proc, "_transport", None)  # asyncio keeps the SubprocessTransport here
    pipe = transport.get_pipe_transport(1) if isinstance(transport, asyncio.SubprocessTransport) else None
    if pipe is None or not hasattr(pipe, "max_size"):
        raise RuntimeError("cannot set the pipe read size on this asyncio version")
    pipe.max_size = size


class RawClient:
    """Newline-delimited JSON-RPC over the child's stdin/stdout, written and read by hand."""

    def __init__(self, spec: ServerSpec, stderr_file: IO[bytes], read_size: int) -> None:
        self.spec = spec
        self.read_size = read_size
        self.proc: asyncio.subprocess.Process | None = None
        self.stderr_file = stderr_file  # the server's stderr goes here, so it can never block on a pipe
        self.notifications = 0
        self.next_id = 1

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    async def spawn(self) -> None:
        self.proc = await asyncio.create_subprocess_exec(
            *self.spec.argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=self.stderr_file,
            env={**os.environ, **self.spec.env},
            limit=READ_LIMIT,
        )
        set_read_size(self.proc, self.read_size)

    def write(self, data: bytes) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(data)

    async def read_message(self) -> dict[str, Any]:
        """Next response from the server; notifications are counted and skipped."""
        assert self.proc is not None and self.proc.stdout is not None
        while True:
            line = await self.proc.stdout.readline()
            if not line:
                raise BenchFailure("server closed stdout (EOF)")
            try:
                msg = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                raise BenchFailure(f"invalid JSON from server: {short(line)}") from exc
            if not isinstance(msg, dict):
                raise BenchFailure(f"non-object message from server: {short(line)}")
            if "method" in msg:
                if "id" in msg:
                    raise BenchFailure(f"unexpected server->client request: {short(msg)}")
                self.notifications += 1
                continue
            if "error" in msg:
                raise BenchFailure(f"error response: {short(msg)}")
            return msg

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        request_id = self.next_id
        self.next_id += 1
        body: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            body["params"] = params
        self.write(orjson.dumps(body) + b"\n")
        msg = await self.read_message()
        if msg.get("id") != request_id:
            raise BenchFailure(f"{method}: expected id {request_id}, got {short(msg)}")
        result = msg.get("result")
        if not isinstance(result, dict):
            raise BenchFailure(f"{method}: no result object: {short(msg)}")
        return result

    async def initialize(self) -> dict[str, Any]:
        result = await self.request(
            "initialize",
            {
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "mcpkit-stdio-bench", "version": "0"},
            },
        )
        if result.get("protocolVersion") != PROTOCOL_VERSION:
            raise BenchFailure(f"initialize: unexpected protocolVersion: {short(result)}")
        return result

    def notify_initialized(self) -> None:
        self.write(orjson.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + b"\n")

    async def list_tools(self) -> None:
        result = await self.request("tools/list")
        tools = result.get("tools")
        names = [t.get("name") for t in tools if isinstance(t, dict)] if isinstance(tools, list) else None
        if names != [TOOL_NAME]:
            raise BenchFailure(f"tools/list: expected exactly the echo tool: {short(result)}")

    async def sequential(self, n: int) -> None:
        """n round trips, one at a time; each response checked for id and text."""
        assert self.proc is not None and self.proc.stdin is not None
        write = self.proc.stdin.write
        read = self.read_message
        first = self.next_id
        for request_id in range(first, first + n):
            write(call_bytes(request_id))
            msg = await read()
            if msg.get("id") != request_id:
                raise BenchFailure(f"tools/call: expected id {request_id}, got {short(msg)}")
            check_call_result(msg)
        self.next_id = first + n

    async def pipelined(self, n: int) -> None:
        """Write n requests without waiting, then read n responses (any order, each id exactly once)."""
        first = self.next_id
        expected = range(first, first + n)
        self.write(b"".join(call_bytes(i) for i in expected))
        # No drain() before reading: the loop flushes the write buffer while we read, and waiting
        # for the flush first could deadlock once the server blocks on a full stdout pipe.
        seen: set[int] = set()
        for _ in expected:
            msg = await self.read_message()
            request_id = msg.get("id")
            if not isinstance(request_id, int) or request_id not in expected or request_id in seen:
                raise BenchFailure(f"pipelined tools/call: unexpected or duplicate id: {short(msg)}")
            seen.add(request_id)
            check_call_result(msg)
        self.next_id = first + n

    async def close(self, grace_s: float = CLOSE_TIMEOUT_S) -> int | None:
        """Close stdin, wait for a clean exit, kill on timeout. Returns the exit code (None if killed)."""
        proc = self.proc
        if proc is None:
            return None
        rc: int | None = None
        try:
            if proc.stdin is not None and not proc.stdin.is_closing():
                proc.stdin.close()
            async with asyncio.timeout(grace_s):
                rc = await proc.wait()
        except (TimeoutError, OSError):
            rc = None
        finally:
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
        return rc

    def stderr_text(self) -> str:
        self.stderr_file.seek(0)
        return self.stderr_file.read().decode(errors="replace")

    def stderr_tail(self, lines: int = 12) -> str:
        text = self.stderr_text().strip()
        if not text:
            return ""
        tail = "\n".join(text.splitlines()[-lines:])
        return f"\n--- server stderr (tail) ---\n{tail}"


# ----------------------------------------------------------------------------------------------- runs


@dataclass
class RunResult:
    cold_ms: float
    seq_s: float
    pipe_s: float
    cpu_seq_us: float
    cpu_pipe_us: float
    rss_idle_kib: int
    hwm_idle_kib: int
    hwm_end_kib: int
    notes: list[str]


@dataclass(frozen=True)
class Settings:
    n: int  # calls per timed phase
    reps: int
    timeout_s: float  # per phase
    handshake_timeout_s: float  # spawn -> initialize -> tools/list
    client_read_size: int
    seed: int
    warmup: int = WARMUP_CALLS  # untimed sequential calls before the timed phases (at most) ...
    warmup_s: float = WARMUP_S  # ... or for this long, whichever comes first


async def run_one(spec: ServerSpec, cfg: Settings) -> RunResult:
    with tempfile.TemporaryFile() as stderr_file:
        client = RawClient(spec, stderr_file, cfg.client_read_size)
        try:
            return await measure(client, cfg)
        except BenchFailure as exc:
            rc = await client.close(FAILED_CLOSE_TIMEOUT_S)
            status = f" (exit status {rc})" if rc is not None else ""
            raise BenchFailure(f"{exc}{status}{client.stderr_tail()}") from exc
        finally:
            await client.close()


async def measure(client: RawClient, cfg: Settings) -> RunResult:
    n = cfg.n
    phase = "handshake"
    try:
        async with asyncio.timeout(cfg.handshake_timeout_s):
            t0 = time.perf_counter_ns()
            await client.spawn()
            await client.initialize()
            cold_ms = (time.perf_counter_ns() - t0) / 1e6
            client.notify_initialized()
            await client.list_tools()
        await asyncio.sleep(IDLE_SETTLE_S)
        idle = proc_status_kib(client.pid)

        phase = "warm-up"
        async with asyncio.timeout(cfg.timeout_s):
            warm_end = time.perf_counter() + cfg.warmup_s
            done = 0
            while done < WARMUP_MIN or (done < cfg.warmup and time.perf_counter() < warm_end):
                await client.sequential(50)
                done += 50

        phase = "sequential"
        async with asyncio.timeout(cfg.timeout_s):
            cpu0 = proc_cpu_ticks(client.pid)
            t0 = time.perf_counter_ns()
            await client.sequential(n)
            seq_s = (time.perf_counter_ns() - t0) / 1e9
            cpu1 = proc_cpu_ticks(client.pid)

        phase = "pipelined"
        async with asyncio.timeout(cfg.timeout_s):
            t0 = time.perf_counter_ns()
            await client.pipelined(n)
            pipe_s = (time.perf_counter_ns() - t0) / 1e9
            cpu2 = proc_cpu_ticks(client.pid)
        end = proc_status_kib(client.pid)
    except TimeoutError as exc:
        raise BenchFailure(f"{phase}: timed out waiting for the server") from exc
    except OSError as exc:
        raise BenchFailure(f"{phase}: I/O error talking to the server: {exc}") from exc
    except BenchFailure as exc:
        raise BenchFailure(f"{phase}: {exc}") from exc

    notes: list[str] = []
    rc = await client.close()
    if rc != 0:
        notes.append(f"exit status after stdin EOF: {rc if rc is not None else 'killed after timeout'}")
    if client.notifications:
        notes.append(f"{client.notifications} notifications received")
    stderr = client.stderr_text().strip()
    if stderr:
        first = stderr.splitlines()[0]
        notes.append(f"stderr: {len(stderr)} chars, first line: {first[:160]!r}")
    tick_us = 1e6 / CLK_TCK
    return RunResult(
        cold_ms=cold_ms,
        seq_s=seq_s,
        pipe_s=pipe_s,
        cpu_seq_us=(cpu1 - cpu0) * tick_us / n,
        cpu_pipe_us=(cpu2 - cpu1) * tick_us / n,
        rss_idle_kib=idle["VmRSS"],
        hwm_idle_kib=idle["VmHWM"],
        hwm_end_kib=end["VmHWM"],
        notes=notes,
    )


@dataclass
class ServerStats:
    runs: list[RunResult] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def median(self, get: Callable[[RunResult], float]) -> float:
        return statistics.median(get(r) for r in self.runs)


async def bench(specs: Sequence[ServerSpec], cfg: Settings) -> dict[str, ServerStats]:
    stats = {spec.name: ServerStats() for spec in specs}
    rng = random.Random(cfg.seed)
    for rep in range(1, cfg.reps + 1):
        order = list(specs)
        rng.shuffle(order)
        print(f"rep {rep}/{cfg.reps}: {' -> '.join(s.name for s in order)}", file=sys.stderr, flush=True)
        for spec in order:
            try:
                result = await run_one(spec, cfg)
            except BenchFailure as exc:
                stats[spec.name].failures.append(f"rep {rep}: {exc}")
                print(f"  {spec.name}: FAILED: {exc}", file=sys.stderr, flush=True)
                continue
            stats[spec.name].runs.append(result)
            print(
                f"  {spec.name:10} cold {result.cold_ms:7.1f} ms  seq {cfg.n / result.seq_s:9,.0f}/s  "
                f"pipe {cfg.n / result.pipe_s:9,.0f}/s  cpu {result.cpu_seq_us:6.1f} us/call  "
                f"idle rss {result.rss_idle_kib / 1024:5.1f} MiB",
                file=sys.stderr,
                flush=True,
            )
    return stats


# -------------------------------------------------------------------------------------------- report

# Reference numbers from performance-anchors.md (raw client, 2 vCPU AMD EPYC, median of 7, N=2000).
ANCHORS: dict[str, dict[str, float]] = {
    "floor-py": {"seq": 31_185, "pipe": 592_947, "cold": 24.0, "cpu": 5, "rss": 12.1},
    "floor-node": {"seq": 15_552, "pipe": 415_428, "cold": 52.5, "cpu": 30, "rss": 41.2},
    "official": {"seq": 1_840, "pipe": 1_777, "cold": 436.5, "cpu": 525, "rss": 67.9},
    "fastmcp": {"seq": 1_233, "pipe": 1_183, "cold": 627.4, "cpu": 800, "rss": 87.2},
    "ts-sdk": {"seq": 6_141, "pipe": 31_452, "cold": 163.6, "cpu": 140, "rss": 64.2},
}
ANCHOR_LABELS = {
    "floor-py": "floor-py",
    "floor-node": "floor-node",
    "official": "mcp-sdk 2.3.0",
    "fastmcp": "fastmcp 4.2.3",
    "ts-sdk": "ts-sdk 1.32.2",
}
PEER_ORDER = KNOWN_PEERS


@dataclass(frozen=True)
class Metric:
    label: str
    get: Callable[[ServerStats, int], float | None]
    digits: int
    higher_is_better: bool


def seq_rate(s: ServerStats, n: int) -> float | None:
    return statistics.median(n / r.seq_s for r in s.runs) if s.runs else None


def pipe_rate(s: ServerStats, n: int) -> float | None:
    return statistics.median(n / r.pipe_s for r in s.runs) if s.runs else None


def _med(get: Callable[[RunResult], float], scale: float = 1.0) -> Callable[[ServerStats, int], float | None]:
    def inner(s: ServerStats, n: int) -> float | None:
        return s.median(get) * scale if s.runs else None

    return inner


METRICS = (
    Metric("seq calls/s", seq_rate, 0, True),
    Metric("seq calls/s, best rep", lambda s, n: max((n / r.seq_s for r in s.runs), default=None), 0, True),
    Metric("pipelined req/s", pipe_rate, 0, True),
    Metric("cold start ms", _med(lambda r: r.cold_ms), 1, False),
    Metric("CPU µs/call (seq)", _med(lambda r: r.cpu_seq_us), 1, False),
    Metric("CPU µs/call (pipelined)", _med(lambda r: r.cpu_pipe_us), 1, False),
    Metric("idle RSS MiB", _med(lambda r: r.rss_idle_kib, 1 / 1024), 1, False),
    Metric("end HWM MiB", _med(lambda r: r.hwm_end_kib, 1 / 1024), 1, False),
)


def summary(stats: dict[str, ServerStats], n: int) -> dict[str, dict[str, float | None]]:
    """Median figures per peer, for run_all's targets: seq, pipe (rates), cold, cpu, rss."""
    out: dict[str, dict[str, float | None]] = {}
    for name, s in stats.items():
        out[name] = {
            "seq": seq_rate(s, n),
            "pipe": pipe_rate(s, n),
            "cold": _med(lambda r: r.cold_ms)(s, n),
            "cpu": _med(lambda r: r.cpu_seq_us)(s, n),
            "rss": _med(lambda r: r.rss_idle_kib, 1 / 1024)(s, n),
        }
    return out


def render_report(
    stats: dict[str, ServerStats],
    n: int,
    reps: int,
    machine: list[str],
    title_level: str = "#",
    warmup: int = WARMUP_CALLS,
    warmup_s: float = WARMUP_S,
) -> str:
    names = [name for name in PEER_ORDER if name in stats]
    h2 = title_level + "#"
    lines = report_head("stdio: `tools/call` over pipes, raw client", machine, title_level)
    add = lines.append
    add(
        f"Raw orjson client, newline-delimited JSON-RPC over pipes; N={n:,} calls per phase after "
        f"a warm-up of {warmup:,} sequential calls or {warmup_s:g} s, whichever comes first (V8 needs a "
        "few thousand calls to optimise the TS SDK's hot paths); servers interleaved in shuffled order; "
        "medians over the "
        "successful repetitions (column `runs`). Sequential = one request in flight; pipelined = all N "
        "requests written at once, then all N responses read."
    )
    add("")
    add(
        "| server | runs | seq calls/s | seq mean µs | seq min-max calls/s | pipelined req/s | "
        "cold start ms | CPU µs/call seq | CPU µs/call pipe | idle RSS MiB | idle HWM MiB | end HWM MiB |"
    )
    add("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name in names:
        s = stats[name]
        if not s.runs:
            add(f"| **{name}** | 0/{reps} |" + " n/a |" * 10)
            continue
        seq_rates = [n / r.seq_s for r in s.runs]
        add(
            f"| **{name}** | {len(s.runs)}/{reps} | {fmt(statistics.median(seq_rates))} "
            f"| {fmt(s.median(lambda r: r.seq_s) / n * 1e6, 1)} "
            f"| {fmt(min(seq_rates))}-{fmt(max(seq_rates))} "
            f"| {fmt(statistics.median(n / r.pipe_s for r in s.runs))} "
            f"| {fmt(s.median(lambda r: r.cold_ms), 1)} "
            f"| {fmt(s.median(lambda r: r.cpu_seq_us), 1)} | {fmt(s.median(lambda r: r.cpu_pipe_us), 1)} "
            f"| {fmt(s.median(lambda r: r.rss_idle_kib) / 1024, 1)} "
            f"| {fmt(s.median(lambda r: r.hwm_idle_kib) / 1024, 1)} "
            f"| {fmt(s.median(lambda r: r.hwm_end_kib) / 1024, 1)} |"
        )
    add("")
    add(
        f"CPU is utime+stime of the server process from `/proc/PID/stat` (tick = {1e3 / CLK_TCK:g} ms, "
        f"so values below ~{1e6 / CLK_TCK / n * 2:.0f} µs/call are only approximate). "
        "Idle = after `initialize` + `tools/list` + 0.2 s; end HWM = after the pipelined phase. "
        "Cold start here is measured inside the benchmark loop (asyncio subprocess); the dedicated "
        "cold-start measurement is in the start-up section."
    )
    add("")

    others = [name for name in names if name != "mcpkit" and stats[name].runs]
    if "mcpkit" in names and stats["mcpkit"].runs and others:
        add(f"{h2} Ratios: mcpkit against each peer")
        add("")
        add(
            "Each cell is mcpkit's median divided by the peer's median: for throughput (calls/s, req/s) > 1 "
            "means mcpkit is faster; for times and memory < 1 means mcpkit is cheaper. Against a floor, "
            "the throughput cell is how close mcpkit comes to it (1/x = how many times faster the floor is)."
        )
        add("")
        add("| metric | mcpkit | " + " | ".join(f"mcpkit ÷ {o}" for o in others) + " |")
        add("|---|---|" + "---|" * len(others))
        mk = stats["mcpkit"]
        for metric in METRICS:
            mine = metric.get(mk, n)
            cells = [ratio(mine, metric.get(stats[o], n)) for o in others]
            add(f"| {metric.label} | {fmt(mine, metric.digits)} | {' | '.join(cells)} |")
        add("")

    add(f"{h2} Per-repetition seq calls/s and pipelined req/s")
    add("")
    add("| server | seq calls/s | pipelined req/s |")
    add("|---|---|---|")
    for name in names:
        runs = stats[name].runs
        add(
            f"| {name} | {' / '.join(fmt(n / r.seq_s) for r in runs) or 'n/a'} "
            f"| {' / '.join(fmt(n / r.pipe_s) for r in runs) or 'n/a'} |"
        )
    add("")

    add(f"{h2} Reference: anchor numbers (performance-anchors.md, raw client, N=2000, median of 7)")
    add("")
    add("| server | seq calls/s | pipelined req/s | cold start ms | CPU µs/call seq | idle RSS MiB |")
    add("|---|---|---|---|---|---|")
    for name, a in ANCHORS.items():
        add(
            f"| {ANCHOR_LABELS[name]} | {a['seq']:,.0f} | {a['pipe']:,.0f} | {a['cold']} | {a['cpu']:g} "
            f"| {a['rss']} |"
        )
    add("")

    failures = [(name, f) for name in names for f in stats[name].failures]
    notes = [(name, note) for name in names for r in stats[name].runs for note in r.notes]
    lines += failures_and_notes(h2, failures, notes)
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None) -> tuple[argparse.Namespace, Settings]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument(
        "--smoke", action="store_true", help="quick check: mcpkit/official/floor-py, N=100, 1 rep, no writing"
    )
    parser.add_argument("--n", type=int, default=None, help="calls per timed phase (default 2000; smoke 100)")
    parser.add_argument("--reps", type=int, default=None, help="repetitions (default 5; smoke 1)")
    parser.add_argument("--timeout", type=float, default=None, help="seconds per phase (10 + 10 ms * N)")
    parser.add_argument(
        "--handshake-timeout", type=float, default=None, help="seconds for spawn+initialize (30; smoke 15)"
    )
    parser.add_argument(
        "--client-read-kib",
        type=int,
        default=DEFAULT_CLIENT_READ_KIB,
        help=f"client pipe read size (default {DEFAULT_CLIENT_READ_KIB}; 256 = asyncio's default)",
    )
    parser.add_argument(
        "--warmup", type=int, default=None, help=f"warm-up calls at most (default {WARMUP_CALLS}; smoke 50)"
    )
    parser.add_argument(
        "--warmup-s",
        type=float,
        default=None,
        help=f"warm-up seconds at most ({WARMUP_S:g}; smoke 0)",
    )
    add_run_options(parser, install=True)
    parser.add_argument(
        "--peers",
        "--only",
        nargs="+",
        action="extend",
        choices=KNOWN_PEERS,
        help="servers to run (default: all; smoke: mcpkit official floor-py)",
    )
    args = parser.parse_args(argv)
    n = args.n if args.n is not None else (100 if args.smoke else 2000)
    reps = args.reps if args.reps is not None else (1 if args.smoke else 5)
    if n < 1 or reps < 1 or args.client_read_kib < 1:
        parser.error("--n, --reps and --client-read-kib must be >= 1")
    cfg = Settings(
        n=n,
        reps=reps,
        timeout_s=args.timeout if args.timeout is not None else 10.0 + 0.01 * n,
        handshake_timeout_s=(
            args.handshake_timeout if args.handshake_timeout is not None else (15.0 if args.smoke else 30.0)
        ),
        client_read_size=args.client_read_kib * 1024,
        seed=args.seed if args.seed is not None else random.randrange(2**32),
        warmup=args.warmup if args.warmup is not None else (WARMUP_MIN if args.smoke else WARMUP_CALLS),
        warmup_s=args.warmup_s if args.warmup_s is not None else (0.0 if args.smoke else WARMUP_S),
    )
    return args, cfg


def config_line(cfg: Settings) -> str:
    return (
        f"N={cfg.n}, warm-up {cfg.warmup} calls or {cfg.warmup_s:g} s, reps={cfg.reps}, "
        f"client pipe read size {cfg.client_read_size // 1024} KiB, "
        f"shuffle seed {cfg.seed}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    args, cfg = parse_args(argv)
    wanted = list(dict.fromkeys(args.peers or (CORE_PEERS if args.smoke else ALL_PEERS)))
    setup = setup_peers(wanted, install=not args.no_install)
    source = mcpkit_source(snapshot=not args.live_source)
    specs = server_specs(setup.available, source)
    load_before = load_average()
    try:
        stats = asyncio.run(bench(specs, cfg))
    finally:
        source.cleanup()
    machine = [
        *machine_lines(),
        f"packages: mcp {package_version('mcp')}, orjson {package_version('orjson')}; "
        f"mcpkit imported from: {source.note}",
        *setup.lines(),
        config_line(cfg),
        f"load average (1/5/15 min) before: {load_before}; after: {load_average()}",
    ]
    report = render_report(stats, cfg.n, cfg.reps, machine, warmup=cfg.warmup, warmup_s=cfg.warmup_s)
    print(report)
    if any(s.failures for s in stats.values()) or (setup.missing and args.peers):
        print(
            "\nFAILED: a server did not answer correctly (or could not run); RESULTS.md not written.",
            file=sys.stderr,
        )
        return 1
    if not args.smoke and not args.no_write:
        write_section(SECTION, report)
        print(f"\nwrote the stdio section of {RESULTS_PATH}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
