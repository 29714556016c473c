"""Benchmark of scale-out: Streamable HTTP ``tools/call`` req/s at 1, 2 and 4 workers sharing Redis.

Method:

* Server: ``python -m mcpkit run bench/servers/mcpkit_http.py --transport http --port P --workers N
  --redis URL`` (the same ``echo`` server as ``http_bench.py``, run by the command line: one port, N
  worker processes under uvicorn's supervisor, sessions on Redis), each process tree with its own
  ``MCPKIT_REDIS_PREFIX`` (keys deleted afterwards). ``1 (no Redis)`` is the same command without
  ``--redis``: one process, sessions in memory (what Redis costs one worker). Default response
  setting (``json_response=None``): every answer here is JSON.
* Modes: ``modern`` = 2026-07-28 stateless requests (no session; Redis is not touched per request);
  ``legacy`` = 2025-11-25 with a session: an httpx client sends ``initialize`` +
  ``notifications/initialized`` first, wrk then sends its ``Mcp-Session-Id`` on every request, so
  every request of every worker finds the session in Redis (a worker that did not create it rebuilds it
  from its record); a ``DELETE`` ends it afterwards.
* Load: ``wrk -t1 -cC -dDs --timeout 5s -s bench/wrk_mcp_call.lua URL -- ERA [SESSION]`` (the driver
  and response checks of ``http_bench.py``: every response is checked, any error fails the run). wrk
  opens C keep-alive connections; the kernel spreads them over the workers accepting on the shared
  socket.
* Each repetition starts every (workers, mode) pair once, in shuffled order; each process tree gets an
  untimed, checked warm-up run, then the connection counts in shuffled order. Recorded per run: req/s,
  p50/p99, CPU per request of the whole process tree (supervisor + workers, ``/proc``) and of Redis
  (``INFO cpu``). Cells are medians over repetitions; ``scaling`` = median req/s ÷ the 1-worker (Redis)
  median of the same mode and C.
* On a 2-vCPU machine wrk itself needs most of one core: more than ~2x is not possible there, and 4
  workers mostly show the cost of over-subscription.

Usage::

    python bench/scale_bench.py            # full: workers 1 (no Redis), 1, 2, 4; modern and legacy;
                                           # -d5s, 2 s warm-up, 3 reps, c=64; writes its RESULTS.md section
    python bench/scale_bench.py --smoke    # workers 1 and 2, both modes, -d1s, 1 rep, c=16; nothing written
    python bench/scale_bench.py --workers 1 2 --modes legacy --conns 16 64 --reps 5

Needs Redis (default ``redis://127.0.0.1:6379/0``, ``--redis-url``; ``make redis`` starts one) and wrk
(installed with apt-get when missing). The exit status is non-zero if any run fails.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import httpx
from common import (
    CLK_TCK,
    ROOT,
    SERVERS_DIR,
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
    report_head,
    versions_line,
)
from http_bench import (
    HOST,
    LUA_SCRIPT,
    MODERN_VERSION,
    PATH,
    WRK_TIMEOUT,
    LoggedServer,
    WrkResult,
    cells_failed,
    ensure_wrk,
    free_port,
    jsonrpc_body,
    listens_on,
    run_phases,
    run_wrk,
    short,
    stop_notes,
    wrk_version,
)

SECTION = "scale_bench"
SERVER_SCRIPT = SERVERS_DIR / "mcpkit_http.py"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 45.0
HIGH_LOAD = 3.0  # 1-min load average above this on the 2-vCPU machine: say the numbers are suspect

#: Worker counts; 0 stands for "1 worker, no Redis" (in-memory sessions).
NO_REDIS = 0
DEFAULT_WORKERS = (NO_REDIS, 1, 2, 4)
MODES = {"modern": ("modern", False), "legacy": ("legacy", True)}  # name -> (wrk era, session)


def workers_label(n: int) -> str:
    return "1 (no Redis)" if n == NO_REDIS else str(n)


# ----------------------------------------------------------------------------------------------- redis


def redis_client(url: str) -> Any:
    import redis

    return redis.Redis.from_url(url, socket_connect_timeout=3, socket_timeout=10)


def redis_version(url: str) -> str | None:
    """Redis's version, or None when nothing answers at ``url``."""
    import redis

    try:
        info = redis_client(url).info("server")
    except redis.RedisError:
        return None
    return str(info.get("redis_version", "?"))


@contextlib.contextmanager
def redis_for_bench(url: str | None) -> Iterator[tuple[str, str, list[str]]]:
    """(url, version, notes) of the Redis to use: ``url``, else the default one, else (nothing answers
    there and ``redis-server`` is on PATH) a private ``redis-server`` on a free port, stopped at the end."""
    wanted = url or DEFAULT_REDIS_URL
    version = redis_version(wanted)
    if version is not None:
        yield wanted, version, []
        return
    server = shutil.which("redis-server")
    if url is not None or server is None:
        raise BenchFailure(
            f"no Redis answers at {wanted}: start one (`make redis`), pass --redis-url, "
            "or install redis-server"
        )
    port = free_port()
    proc = subprocess.Popen(
        [server, "--port", str(port), "--bind", HOST, "--save", "", "--appendonly", "no"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        private = f"redis://{HOST}:{port}/0"
        deadline = time.monotonic() + 10
        while (version := redis_version(private)) is None:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise BenchFailure(f"could not start a private redis-server on port {port}")
            time.sleep(0.1)
        note = f"nothing answered at {DEFAULT_REDIS_URL}: a private redis-server ran on port {port}"
        yield private, version, [note]
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def redis_cpu_s(url: str) -> float:
    info = redis_client(url).info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


def delete_prefix(url: str, prefix: str) -> int:
    client = redis_client(url)
    keys = list(client.scan_iter(match=f"{prefix}:*", count=1000))
    for i in range(0, len(keys), 500):
        client.delete(*keys[i : i + 500])
    return len(keys)


# --------------------------------------------------------------------------------------------- servers


def children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            stat = (entry / "stat").read_text()
            if int(stat[stat.rindex(")") + 2 :].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def is_worker(pid: int) -> bool:
    with contextlib.suppress(OSError):
        return b"resource_tracker" not in Path(f"/proc/{pid}/cmdline").read_bytes()
    return False


def tree_cpu_ticks(pids: Sequence[int]) -> int:
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            total += proc_cpu_ticks(pid)
    return total


MODERN_PROBE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "tools/call",
    "params": {
        "name": "echo",
        "arguments": {"text": "probe"},
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "scale-bench", "version": "0"},
        },
    },
}
MODERN_HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": MODERN_VERSION,
    "Mcp-Method": "tools/call",
    "Mcp-Name": "echo",
}


class ScaleServer(LoggedServer):
    """``mcpkit run --workers N`` as a process tree: the supervisor and its workers."""

    def __init__(self, workers: int, redis_url: str, source: McpkitSource, log: IO[bytes]) -> None:
        super().__init__(log)
        self.workers = workers
        self.redis_url = redis_url
        self.source = source
        self.prefix = f"mcpkit-scale-bench-{uuid.uuid4().hex[:12]}"
        self.worker_pids: list[int] = []

    def argv(self) -> list[str]:
        argv = [sys.executable, "-m", "mcpkit", "run", str(SERVER_SCRIPT), "--transport", "http"]
        argv += ["--port", str(self.port)]
        if self.workers == NO_REDIS:
            return argv
        return [*argv, "--workers", str(self.workers), "--redis", self.redis_url]

    def env(self) -> dict[str, str]:
        env = {**os.environ, **self.source.env, "MCPKIT_REDIS_PREFIX": self.prefix}
        env.pop("MCPKIT_REDIS_URL", None)
        return env

    def _start_once(self) -> float:
        """Spawn and wait until every worker serves; the start-up time in ms."""
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(
            self.argv(), stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log, env=self.env(), cwd=ROOT
        )
        deadline = t0 + START_TIMEOUT_S
        want = max(1, self.workers)
        with httpx.Client(timeout=5.0) as client:
            while True:
                if self.proc.poll() is not None:
                    raise BenchFailure(f"server exited during start-up (status {self.proc.returncode})")
                if time.perf_counter() > deadline:
                    raise BenchFailure(f"server not ready within {START_TIMEOUT_S:g} s (want {want} workers)")
                if self.workers <= 1:  # one process: `mcpkit run` serves without a supervisor
                    pids = [self.proc.pid]
                else:
                    pids = [p for p in children(self.proc.pid) if is_worker(p) and listens_on(p, self.port)]
                if len(pids) >= want and self._answers(client):
                    self.worker_pids = sorted(pids)
                    return (time.perf_counter() - t0) * 1e3
                time.sleep(0.05)

    def _answers(self, client: httpx.Client) -> bool:
        try:
            resp = client.post(self.url, json=MODERN_PROBE, headers=MODERN_HEADERS)
        except httpx.HTTPError:
            return False
        if resp.status_code != 200:
            return False
        msg = jsonrpc_body(resp)
        if "result" not in msg:
            raise BenchFailure(f"probe answered with an error: {short(msg)}")
        return True

    def pids(self) -> list[int]:
        return sorted({self.pid, *self.worker_pids})

    def check_workers(self) -> None:
        """Fail when a worker died (the supervisor would replace it: the numbers would mean less)."""
        if self.workers <= 1:
            return
        now = sorted(p for p in children(self.pid) if is_worker(p))
        if now != self.worker_pids:
            raise BenchFailure(f"worker processes changed during the run: {self.worker_pids} -> {now}")

    def stop(self) -> int | None:
        proc = self.proc
        if proc is None:
            return None
        workers = list(self.worker_pids)
        rc: int | None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                rc = proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                rc = None
        else:
            rc = proc.returncode
        for pid in workers:  # never leave a worker behind
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if self.workers != NO_REDIS:
            with contextlib.suppress(Exception):
                delete_prefix(self.redis_url, self.prefix)
        return rc


# ------------------------------------------------------------------------------------------------ runs


@dataclass
class Run:
    wrk: WrkResult
    cpu_us: float  # supervisor + workers, per request
    redis_cpu_us: float | None  # the Redis server, per request


@dataclass
class Unit:
    start_ms: float
    runs: dict[int, Run]
    notes: list[str]


@dataclass
class Cell:
    units: list[Unit] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def runs(self, conns: int) -> list[Run]:
        return [u.runs[conns] for u in self.units if conns in u.runs]

    def median(self, conns: int, get: Callable[[Run], float | None]) -> float | None:
        values = [v for v in (get(r) for r in self.runs(conns)) if v is not None]
        return statistics.median(values) if values else None


@dataclass(frozen=True)
class Settings:
    workers: tuple[int, ...]
    modes: tuple[str, ...]
    duration_s: int
    warmup_s: int
    reps: int
    conns: tuple[int, ...]
    seed: int
    redis_url: str


def measure(
    wrk: str, server: ScaleServer, conns: int, seconds: int, era: str, session: str | None, cfg: Settings
) -> Run:
    pids = server.pids()
    ticks0 = tree_cpu_ticks(pids)
    redis0 = redis_cpu_s(cfg.redis_url)
    result = run_wrk(wrk, server.url, conns, seconds, era, session, server.pid)
    redis1 = redis_cpu_s(cfg.redis_url)
    ticks1 = tree_cpu_ticks(pids)
    server.check_workers()
    cpu_us = (ticks1 - ticks0) * (1e6 / CLK_TCK) / result.requests
    redis_us = (redis1 - redis0) * 1e6 / result.requests if server.workers != NO_REDIS else None
    return Run(result, cpu_us, redis_us)


def run_unit(
    wrk: str, workers: int, mode: str, cfg: Settings, source: McpkitSource, rng: random.Random, rep: int
) -> tuple[Unit | None, list[str]]:
    era, with_session = MODES[mode]
    failures: list[str] = []
    with tempfile.TemporaryFile() as log, httpx.Client(timeout=10.0) as client:
        server = ScaleServer(workers, cfg.redis_url, source, log)

        def measure_one(conns: int, seconds: int, session: str | None) -> Run:
            return measure(wrk, server, conns, seconds, era, session, cfg)

        try:
            start_ms = server.start()
            runs, failures = run_phases(
                server, client, cfg.conns, cfg.warmup_s, cfg.duration_s, rng, with_session, measure_one
            )
        except BenchFailure as exc:
            failures.append(f"{exc}{server.log_tail()}")
            server.stop()
            return None, failures
        finally:
            rc = server.stop()
        notes = stop_notes(server, rc, f"scale_{workers_label(workers).split()[0]}_{mode}_rep{rep}.log")
        return Unit(start_ms, runs, notes), failures


def bench(wrk: str, cfg: Settings, source: McpkitSource) -> dict[tuple[int, str], Cell]:
    cells = {(w, m): Cell() for w in cfg.workers for m in cfg.modes}
    rng = random.Random(cfg.seed)
    for rep in range(1, cfg.reps + 1):
        order = list(cells)
        rng.shuffle(order)
        print(f"rep {rep}/{cfg.reps}: {len(order)} server process trees", file=sys.stderr, flush=True)
        for workers, mode in order:
            t0 = time.perf_counter()
            unit, failures = run_unit(wrk, workers, mode, cfg, source, rng, rep)
            cell = cells[(workers, mode)]
            label = f"workers {workers_label(workers):12} {mode:6}"
            for failure in failures:
                cell.failures.append(f"rep {rep}: {failure}")
                print(f"  {label} FAILED: {failure}", file=sys.stderr, flush=True)
            if unit is None:
                continue
            cell.units.append(unit)
            parts = [
                f"c={c}: {r.wrk.rps:8,.0f}/s p50 {r.wrk.p50_ms:6.2f} p99 {r.wrk.p99_ms:7.2f} ms "
                f"cpu {r.cpu_us:5.0f} us redis {fmt(r.redis_cpu_us)} us"
                for c, r in sorted(unit.runs.items())
            ]
            print(
                f"  {label} start {unit.start_ms:6.0f} ms ({time.perf_counter() - t0:4.1f} s)\n    "
                + "\n    ".join(parts),
                file=sys.stderr,
                flush=True,
            )
    return cells


# ---------------------------------------------------------------------------------------------- report


def scaling(cells: dict[tuple[int, str], Cell], workers: int, mode: str, conns: int) -> float | None:
    base = cells.get((1, mode))
    cell = cells.get((workers, mode))
    if base is None or cell is None:
        return None
    b = base.median(conns, lambda r: r.wrk.rps)
    v = cell.median(conns, lambda r: r.wrk.rps)
    return v / b if v is not None and b else None


def summary(cells: dict[tuple[int, str], Cell]) -> dict[tuple[int, str, int], float | None]:
    """Median req/s per (workers, mode, connections)."""
    out: dict[tuple[int, str, int], float | None] = {}
    for (workers, mode), cell in cells.items():
        for conns in {c for u in cell.units for c in u.runs}:
            out[(workers, mode, conns)] = cell.median(conns, lambda r: r.wrk.rps)
    return out


def render_report(
    cells: dict[tuple[int, str], Cell], cfg: Settings, machine: list[str], title_level: str = "#"
) -> str:
    h2 = title_level + "#"
    lines = report_head(
        "Scale-out: `mcpkit run --workers N --redis URL`, Streamable HTTP `tools/call` with wrk",
        machine,
        title_level,
    )
    add = lines.append
    add(
        f"One port served by N worker processes (uvicorn's supervisor, shared socket) that share legacy "
        f"sessions on Redis; `1 (no Redis)` is one process with sessions in memory. wrk -t1, "
        f"{cfg.duration_s} s per run after a {cfg.warmup_s} s warm-up per process tree; every response "
        "checked; (workers, mode) pairs interleaved in shuffled order, medians over the successful "
        f"repetitions (`runs`, out of {cfg.reps}). `scaling` = req/s ÷ the 1-worker (Redis) req/s of the "
        "same mode and C. CPU = utime+stime of the supervisor and every worker per request; Redis CPU = "
        "`used_cpu_sys + used_cpu_user` of `INFO cpu` per request (other clients of that Redis would "
        f"count too). On this {os.cpu_count()}-vCPU machine wrk needs most of one core, so the workers share "
        "what is left: expect at most ~2x here, and 4 workers on 2 vCPUs mostly measure over-subscription."
    )
    add("")
    add(
        "Modes: `modern` = 2026-07-28 stateless requests (no session, nothing read from Redis per request); "
        "`legacy` = 2025-11-25 with one session opened by `initialize` before each wrk run and sent as "
        "`Mcp-Session-Id` by every request (each request reads the session from Redis, on whichever "
        "worker it lands)."
    )
    add("")
    add(f"{h2} Results (median req/s)")
    add("")
    head = "| mode | workers | runs |"
    sep = "|---|---|---|"
    for c in cfg.conns:
        head += (
            f" c={c} req/s | c={c} scaling | c={c} p50 / p99 ms | c={c} CPU µs/req | c={c} Redis CPU µs/req |"
        )
        sep += "---|---|---|---|---|"
    head += " start-up ms |"
    sep += "---|"
    add(head)
    add(sep)
    for mode in cfg.modes:
        for workers in cfg.workers:
            cell = cells.get((workers, mode))
            if cell is None:
                continue
            row = f"| `{mode}` | {workers_label(workers)} | {len(cell.units)}/{cfg.reps} |"
            for c in cfg.conns:
                rps = cell.median(c, lambda r: r.wrk.rps)
                s = scaling(cells, workers, mode, c)
                p50 = cell.median(c, lambda r: r.wrk.p50_ms)
                p99 = cell.median(c, lambda r: r.wrk.p99_ms)
                cpu = cell.median(c, lambda r: r.cpu_us)
                rcpu = cell.median(c, lambda r: r.redis_cpu_us)
                row += (
                    f" {fmt(rps)} | {'n/a' if s is None else f'{s:.2f}x'} | {fmt(p50, 2)} / {fmt(p99, 2)} |"
                    f" {fmt(cpu)} | {fmt(rcpu) if workers != NO_REDIS else '-'} |"
                )
            starts = [u.start_ms for u in cell.units]
            row += f" {fmt(statistics.median(starts) if starts else None)} |"
            add(row)
    add("")
    add(f"{h2} Per-repetition req/s")
    add("")
    add("| mode | workers | " + " | ".join(f"c={c}" for c in cfg.conns) + " |")
    add("|---|---|" + "---|" * len(cfg.conns))
    for mode in cfg.modes:
        for workers in cfg.workers:
            cell = cells.get((workers, mode))
            if cell is None:
                continue
            per = " | ".join(" / ".join(fmt(r.wrk.rps) for r in cell.runs(c)) or "n/a" for c in cfg.conns)
            add(f"| `{mode}` | {workers_label(workers)} | {per} |")
    add("")
    what = {(w, m): f"workers {workers_label(w)} `{m}`" for w, m in cells}
    failures = [(what[key], f) for key, cell in cells.items() for f in cell.failures]
    notes = [(what[key], n) for key, cell in cells.items() for u in cell.units for n in u.notes]
    lines += failures_and_notes(h2, failures, notes)
    return "\n".join(lines)


def failed(cells: dict[tuple[int, str], Cell], cfg: Settings) -> bool:
    return cells_failed(cells.values(), cfg.conns)


def config_line(cfg: Settings) -> str:
    return (
        f"workers={[workers_label(w) for w in cfg.workers]}, modes={list(cfg.modes)}, -d{cfg.duration_s}s, "
        f"warm-up {cfg.warmup_s} s, reps={cfg.reps}, c={list(cfg.conns)}, shuffle seed {cfg.seed}"
    )


def machine_info(cfg: Settings, wrk: str, redis_version: str, source_note: str) -> list[str]:
    return [
        f"Redis {redis_version} at `{cfg.redis_url}` (a fresh `MCPKIT_REDIS_PREFIX` per process tree)",
        f"packages: {versions_line(('uvicorn', 'h11', 'redis', 'msgspec', 'httpx'))}; mcpkit: {source_note}",
        f"load generator: {wrk_version(wrk)}: `wrk -t1 -cC -dDs --timeout {WRK_TIMEOUT} "
        f"-s {LUA_SCRIPT.relative_to(ROOT)} http://127.0.0.1:PORT{PATH} -- ERA SESSION`",
        "server: `python -m mcpkit run bench/servers/mcpkit_http.py --transport http --port PORT "
        "--workers N --redis URL` (`1 (no Redis)`: without `--workers` and `--redis`)",
        config_line(cfg),
    ]


# ------------------------------------------------------------------------------------------------ main


def make_settings(
    *,
    smoke: bool,
    redis_url: str,
    workers: Sequence[int] | None = None,
    modes: Sequence[str] | None = None,
    duration: int | None = None,
    warmup: int | None = None,
    reps: int | None = None,
    conns: Sequence[int] | None = None,
    seed: int | None = None,
) -> Settings:
    return Settings(
        workers=tuple(workers or ((1, 2) if smoke else DEFAULT_WORKERS)),
        modes=tuple(modes or tuple(MODES)),
        duration_s=duration if duration is not None else (1 if smoke else 5),
        warmup_s=warmup if warmup is not None else (1 if smoke else 2),
        reps=reps if reps is not None else (1 if smoke else 3),
        conns=tuple(conns or ((16,) if smoke else (64,))),
        seed=seed if seed is not None else random.randrange(2**32),
        redis_url=redis_url,
    )


def run(
    wrk: str, cfg_for: Callable[[str], Settings], redis_url: str | None, source: McpkitSource
) -> tuple[Settings, dict[tuple[int, str], Cell], list[str]]:
    """Find (or start) Redis, then run the benchmark; the settings, the cells and machine lines."""
    with redis_for_bench(redis_url) as (url, version, notes):
        cfg = cfg_for(url)
        cells = bench(wrk, cfg, source)
    return cfg, cells, [*machine_info(cfg, wrk, version, source.note), *notes]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--smoke", action="store_true", help="workers 1 2, -d1s, 1 rep, c=16; nothing written")
    p.add_argument(
        "--workers", type=int, nargs="+", help="worker counts; 0 = one worker without Redis (0 1 2 4)"
    )
    p.add_argument("--modes", nargs="+", choices=tuple(MODES), help="default: modern legacy")
    p.add_argument("--duration", type=int, help="seconds per wrk run (5; smoke 1)")
    p.add_argument("--warmup", type=int, help="warm-up seconds per process tree (2; smoke 1)")
    p.add_argument("--reps", type=int, help="repetitions (3; smoke 1)")
    p.add_argument("--conns", type=int, nargs="+", help="connection counts (64; smoke 16)")
    add_run_options(p)
    p.add_argument(
        "--redis-url",
        default=os.environ.get("MCPKIT_BENCH_REDIS_URL"),
        help=f"default {DEFAULT_REDIS_URL}, else a private redis-server when nothing answers there",
    )
    a = p.parse_args(argv)
    if (a.duration is not None and a.duration < 1) or (a.reps is not None and a.reps < 1):
        p.error("--duration and --reps must be >= 1")
    if (a.warmup is not None and a.warmup < 0) or any(c < 1 for c in a.conns or ()):
        p.error("--warmup must be >= 0 and --conns >= 1")
    if any(w < 0 for w in a.workers or ()):
        p.error("--workers must be >= 0")
    return a


def main(argv: Sequence[str] | None = None) -> int:
    a = parse_args(argv)

    def cfg_for(url: str) -> Settings:
        return make_settings(
            smoke=a.smoke,
            redis_url=url,
            workers=a.workers,
            modes=a.modes,
            duration=a.duration,
            warmup=a.warmup,
            reps=a.reps,
            conns=a.conns,
            seed=a.seed,
        )

    wrk, install_notes = ensure_wrk()
    source = mcpkit_source(snapshot=not a.live_source)
    load_before = load_average()
    t0 = time.perf_counter()
    try:
        cfg, cells, info = run(wrk, cfg_for, a.redis_url, source)
    except BenchFailure as exc:
        print(f"FAILED: {exc}", file=sys.stderr)
        return 1
    finally:
        source.cleanup()
    elapsed = time.perf_counter() - t0
    load_after = load_average()
    busy = max(float(load_before.split(" / ")[0]), float(load_after.split(" / ")[0])) > HIGH_LOAD
    machine = [
        *machine_lines(),
        *info,
        *install_notes,
        f"wall time {elapsed:.0f} s; load average (1/5/15 min) before: {load_before}; after: {load_after}"
        + (
            f" — **the machine was busy** (1-min load above {HIGH_LOAD:g}: other work shared the CPUs), so "
            "absolute numbers are low and noisy"
            if busy
            else ""
        ),
    ]
    report = render_report(cells, cfg, machine)
    return finish(
        report, failed(cells, cfg), write=not a.smoke and not a.no_write, section=SECTION, label="scale"
    )


if __name__ == "__main__":
    sys.exit(main())
