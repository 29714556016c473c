"""Benchmark of Streamable HTTP ``tools/call`` throughput: mcpkit vs its peers vs a bare ASGI floor.

Method (docs: /work/shared/docs/performance-anchors.md, section 3):

* Servers (``bench/peers.py``), each serving one tool ``echo(text: str) -> str`` over Streamable HTTP on
  127.0.0.1 at ``/mcp``: ``bench/servers/mcpkit_http.py``, ``official_http.py`` and ``fastmcp_http.py`` (one
  uvicorn worker each: asyncio loop, httptools when installed, else h11), ``ts_http.mjs`` (TypeScript
  SDK, ``node:http`` + ``StreamableHTTPServerTransport``) and ``floor_http.py`` (a bare ASGI app on the
  same uvicorn defaults, answering with a hand-built result). Each takes ``PORT MODE``.
* Modes: ``json`` = legacy stateful sessions with JSON responses; ``sse`` = legacy stateful sessions with SSE
  responses; ``modern`` = 2026-07-28 stateless requests (``_meta`` envelope + ``MCP-Protocol-Version``,
  ``Mcp-Method``, ``Mcp-Name`` headers) against each server's default response setting; ``modern-json`` and
  ``stateless-json`` (legacy, no session) on request. The TS SDK 1.x has no modern mode; a server runs only
  the modes it supports (``peers.HTTP_MODES``). What each mode means for each server is in the report.
* Load: ``wrk -t1 -cC -dDs --timeout 5s -s bench/wrk_mcp_call.lua URL -- ERA [SESSION]`` at C = 1, 16, 64.
  The Lua script POSTs a ``tools/call`` with a unique JSON-RPC id per request and checks every response
  (status 200, an unseen id it sent, the echoed text, no error); any bad body, wrk error or unchecked
  response fails the run.
* Session-ful modes: before each wrk run an httpx client opens a fresh session (``initialize`` +
  ``notifications/initialized``, protocol 2025-11-25) and wrk sends its ``Mcp-Session-Id``; a ``DELETE``
  closes it afterwards.
* Each repetition starts every (server, mode) pair once, in shuffled order; each server process gets an
  untimed, checked warm-up wrk run (c=16) and then the connection counts in shuffled order. Recorded per
  run: req/s, p50/p99 latency, server CPU per request (utime+stime from ``/proc/PID/stat``); per process:
  RSS after start-up and peak RSS (VmHWM from ``/proc/PID/status``) after the last run. Every figure in the
  report is a median over repetitions.
* The mcpkit servers import a byte-compiled copy of ``src/mcpkit`` taken when the run starts
  (``--live-source`` turns this off), since other people may edit ``src/`` during a ten-minute run. A server
  that prints anything has its output kept in a temporary directory named in the report's notes.

Usage::

    python bench/http_bench.py            # full: all peers, -d5s after a 2 s warm-up, 3 reps, modes
                                          # json sse modern, c=1,16,64; writes its RESULTS.md section
    python bench/http_bench.py --smoke    # quick check: mcpkit/official/floor-py, -d1s, 1 rep, c=16, json
    python bench/http_bench.py --modes json --conns 16 --reps 5 --peers mcpkit official ts-sdk

wrk is installed with ``apt-get install -y wrk`` (Debian package) when it is not on PATH.
The exit status is non-zero if any run fails.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import random
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, TypeVar

import httpx
from common import (
    BENCH_DIR,
    CLK_TCK,
    RESULTS_PATH,
    ROOT,
    TEXT,
    BenchFailure,
    McpkitSource,
    add_run_options,
    failures_and_notes,
    fmt,
    load_average,
    machine_lines,
    mcpkit_source,
    proc_cpu_ticks,
    proc_status_kib,
    ratio,
    report_head,
    versions_line,
    write_section,
)
from peers import (
    CORE_PEERS,
    HTTP_MODES,
    HTTP_SCRIPTS,
    KNOWN_PEERS,
    OPT_IN_PEERS,
    http_argv,
    peer_env,
    setup_peers,
)

SECTION = "http_bench"
LUA_SCRIPT = BENCH_DIR / "wrk_mcp_call.lua"
HOST = "127.0.0.1"
PATH = "/mcp"
LEGACY_VERSION = "2025-11-25"
MODERN_VERSION = "2026-07-28"
WRK_TIMEOUT = "5s"
WARMUP_CONNS = 16
START_TIMEOUT_S = 30.0
START_ATTEMPTS = 3
STOP_TIMEOUT_S = 10.0
R = TypeVar("R")
HTTP_PEERS = tuple(p for p in KNOWN_PEERS if p in HTTP_SCRIPTS)
assert TEXT == "hello, world"  # wrk_mcp_call.lua sends and checks the same text


# ----------------------------------------------------------------------------------------------- modes


@dataclass(frozen=True)
class Mode:
    name: str
    era: str  # "legacy" or "modern" (the wrk script's first argument)
    session: bool  # open an initialize session before each wrk run
    label: str  # short description for the report
    servers: dict[str, str]  # what the mode means for each server (absent: not supported)


MODES: dict[str, Mode] = {
    m.name: m
    for m in (
        Mode(
            "json",
            "legacy",
            True,
            "legacy stateful, JSON responses",
            {
                "mcpkit": '`server.run("http", json_response=True)`',
                "official": '`run("streamable-http", json_response=True)`',
                "fastmcp": '`run("http", json_response=True)`',
                "ts-sdk": "one `StreamableHTTPServerTransport` per session, `enableJsonResponse: true`",
                "floor-py": "`application/json`",
            },
        ),
        Mode(
            "sse",
            "legacy",
            True,
            "legacy stateful, SSE responses",
            {
                "mcpkit": '`server.run("http", json_response=False)`',
                "official": '`run("streamable-http")` (default: `json_response=False`)',
                "fastmcp": '`run("http")` (default: `json_response=False`)',
                "ts-sdk": "one transport per session, the SDK default (SSE responses)",
                "floor-py": "one-event `text/event-stream`, chunked",
            },
        ),
        Mode(
            "modern",
            "modern",
            False,
            "2026-07-28 stateless, default response setting",
            {
                "mcpkit": '`server.run("http")` (default `json_response=None`: JSON unless the handler '
                "sends something first)",
                "official": '`run("streamable-http")` (defaults; modern requests are routed by the '
                "`MCP-Protocol-Version` header whatever `stateless_http` is; `json_response=False` runs "
                "the tool in a task group and answers JSON when it finishes before the SSE deferral window)",
                "fastmcp": '`run("http")` (defaults; fastmcp serves HTTP with the `mcp` session manager, '
                "so modern requests are routed as in `mcp`)",
                "floor-py": "`application/json`",
            },
        ),
        Mode(
            "modern-json",
            "modern",
            False,
            "2026-07-28 stateless, `json_response=True`",
            {
                "mcpkit": '`server.run("http", json_response=True)`',
                "official": '`run("streamable-http", json_response=True)` (answers in the ASGI task)',
                "fastmcp": '`run("http", json_response=True)`',
                "floor-py": "`application/json`",
            },
        ),
        Mode(
            "stateless-json",
            "legacy",
            False,
            "legacy stateless (no session), JSON responses",
            {
                "mcpkit": '`server.run("http", stateless=True, json_response=True)`',
                "official": '`run("streamable-http", stateless_http=True, json_response=True)`',
                "fastmcp": '`run("http", stateless_http=True, json_response=True)`',
                "ts-sdk": "a new `McpServer` + transport per request (`sessionIdGenerator: undefined`, "
                "`enableJsonResponse: true`), the SDK's documented stateless pattern",
                "floor-py": "`application/json`",
            },
        ),
    )
}
DEFAULT_MODES = ("json", "sse", "modern")

# --------------------------------------------------------------------------------------------- servers


@dataclass(frozen=True)
class ServerSpec:
    name: str
    env: dict[str, str] = field(default_factory=dict)

    def argv(self, port: int, mode: str) -> list[str]:
        return http_argv(self.name, port, mode)

    def supports(self, mode: str) -> bool:
        return mode in HTTP_MODES[self.name]


def server_specs(peers: Sequence[str], source: McpkitSource) -> list[ServerSpec]:
    return [ServerSpec(name, peer_env(name, source)) for name in peers if name in HTTP_SCRIPTS]


# ------------------------------------------------------------------------------------------------- wrk


def ensure_wrk() -> tuple[str, list[str]]:
    """The wrk binary, installing the Debian package when it is missing; and notes on what was done."""
    notes: list[str] = []
    found = shutil.which("wrk")
    if found:
        return found, notes
    if not shutil.which("apt-get"):
        raise SystemExit("wrk is not installed and apt-get is not available: install wrk (4.x) and retry")
    prefix = [] if os.geteuid() == 0 else (["sudo", "-n"] if shutil.which("sudo") else [])
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = [*prefix, "apt-get", "install", "-y", "--no-install-recommends", "wrk"]
    print(f"wrk not found on PATH: running `{shlex.join(install)}`", file=sys.stderr, flush=True)
    done = subprocess.run(install, env=env, capture_output=True, text=True, check=False)
    notes.append(f"wrk was missing: ran `{shlex.join(install)}` (exit {done.returncode})")
    if done.returncode != 0:
        update = [*prefix, "apt-get", "update"]
        print(
            f"  failed (exit {done.returncode}); running `{shlex.join(update)}` and retrying", file=sys.stderr
        )
        upd = subprocess.run(update, env=env, capture_output=True, text=True, check=False)
        done = subprocess.run(install, env=env, capture_output=True, text=True, check=False)
        notes.append(
            f"then `{shlex.join(update)}` (exit {upd.returncode}) and the install again "
            f"(exit {done.returncode})"
        )
    found = shutil.which("wrk")
    if done.returncode != 0 or not found:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-10:])
        raise SystemExit(f"could not install wrk with apt-get:\n{tail}")
    print(f"  installed {wrk_version(found)} at {found}", file=sys.stderr, flush=True)
    return found, notes


def wrk_version(wrk: str) -> str:
    out = subprocess.run([wrk, "-v"], capture_output=True, text=True, check=False)
    first = (out.stdout + out.stderr).strip().splitlines()
    return first[0].split(" Copyright")[0].strip() if first else "wrk (version unknown)"


@dataclass
class WrkResult:
    conns: int
    requests: int
    duration_s: float
    rps: float
    p50_ms: float
    p99_ms: float
    mean_ms: float
    max_ms: float
    server_cpu_us: float  # server CPU (utime+stime) per request during the run
    resp_bytes: float  # bytes wrk read per response (status line, headers and body)
    raw: dict[str, Any]


def wrk_argv(wrk: str, url: str, conns: int, duration: str, era: str, session: str | None) -> list[str]:
    return [
        wrk,
        "-t1",
        f"-c{conns}",
        f"-d{duration}",
        "--timeout",
        WRK_TIMEOUT,
        "-s",
        str(LUA_SCRIPT),
        url,
        "--",
        era,
        session or "-",
    ]


def run_wrk(
    wrk: str, url: str, conns: int, duration_s: int, era: str, session: str | None, pid: int
) -> WrkResult:
    argv = wrk_argv(wrk, url, conns, f"{duration_s}s", era, session)
    try:
        cpu0 = proc_cpu_ticks(pid)
        done = subprocess.run(argv, capture_output=True, text=True, timeout=duration_s + 30, check=False)
        cpu1 = proc_cpu_ticks(pid)
    except subprocess.TimeoutExpired as exc:
        raise BenchFailure(f"wrk -c{conns} did not finish within {duration_s + 30} s") from exc
    except OSError as exc:
        raise BenchFailure(f"server process {pid} is gone: {exc}") from exc
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("WRK_RESULT ")), None)
    if done.returncode != 0 or line is None:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-8:])
        raise BenchFailure(f"wrk -c{conns} failed (exit {done.returncode}):\n{tail}")
    raw = json.loads(line.removeprefix("WRK_RESULT "))
    errors = {k: raw[k] for k in ("connect", "read", "write", "status", "timeout") if raw[k]}
    problems = []
    if errors:
        problems.append(f"wrk errors {errors}")
    if raw["bad"]:
        problems.append(f"{raw['bad']} bad bodies (first: {raw['first_bad']!r})")
    if raw["checked"] != raw["requests"]:
        problems.append(f"{raw['requests']} responses but {raw['checked']} checked")
    if raw["requests"] == 0:
        problems.append("no responses at all")
    if problems:
        raise BenchFailure(f"wrk -c{conns}: " + "; ".join(problems))
    duration = raw["duration_us"] / 1e6
    return WrkResult(
        conns=conns,
        requests=raw["requests"],
        duration_s=duration,
        rps=raw["requests"] / duration,
        p50_ms=raw["p50_us"] / 1e3,
        p99_ms=raw["p99_us"] / 1e3,
        mean_ms=raw["mean_us"] / 1e3,
        max_ms=raw["max_us"] / 1e3,
        server_cpu_us=(cpu1 - cpu0) * (1e6 / CLK_TCK) / raw["requests"],
        resp_bytes=raw["bytes"] / raw["requests"],
        raw=raw,
    )


# ------------------------------------------------------------------------------------------- sessions


def short(obj: object, limit: int = 300) -> str:
    text = obj.decode(errors="replace") if isinstance(obj, bytes) else str(obj)
    return text if len(text) <= limit else text[:limit] + "..."


def jsonrpc_body(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC message of a JSON or single-event SSE response."""
    ctype = response.headers.get("content-type", "")
    text = response.text
    if ctype.startswith("text/event-stream"):
        datas = [ln[5:].strip() for ln in text.splitlines() if ln.startswith("data:") and ln[5:].strip()]
        if not datas:
            raise BenchFailure(f"SSE response without a data line: {short(text)}")
        text = datas[-1]
    try:
        msg = json.loads(text)
    except ValueError as exc:
        raise BenchFailure(f"invalid JSON ({ctype}): {short(text)}") from exc
    if not isinstance(msg, dict):
        raise BenchFailure(f"non-object JSON-RPC message: {short(text)}")
    return msg


LEGACY_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def open_session(client: httpx.Client, url: str) -> str:
    """``initialize`` + ``notifications/initialized``; returns the Mcp-Session-Id."""
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": LEGACY_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "mcpkit-http-bench", "version": "0"},
        },
    }
    resp = client.post(url, json=init, headers=LEGACY_HEADERS)
    if resp.status_code != 200:
        raise BenchFailure(f"initialize: HTTP {resp.status_code}: {short(resp.text)}")
    msg = jsonrpc_body(resp)
    result = msg.get("result")
    if not isinstance(result, dict) or result.get("protocolVersion") != LEGACY_VERSION:
        raise BenchFailure(f"initialize: unexpected answer: {short(msg)}")
    session = resp.headers.get("mcp-session-id")
    if not session:
        raise BenchFailure("initialize: no Mcp-Session-Id header")
    headers = {**LEGACY_HEADERS, "Mcp-Session-Id": session, "MCP-Protocol-Version": LEGACY_VERSION}
    note = client.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
    if note.status_code != 202:
        raise BenchFailure(f"notifications/initialized: HTTP {note.status_code}: {short(note.text)}")
    return session


def close_session(client: httpx.Client, url: str, session: str) -> None:
    resp = client.delete(url, headers={"Mcp-Session-Id": session, "MCP-Protocol-Version": LEGACY_VERSION})
    if resp.status_code not in (200, 202, 204):
        raise BenchFailure(f"DELETE session: HTTP {resp.status_code}: {short(resp.text)}")


# ------------------------------------------------------------------------------------------ processes


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def listens_on(pid: int, port: int) -> bool:
    """Whether process ``pid`` itself has a socket listening on 127.0.0.1:``port`` (from /proc).

    A plain connect() is not enough: another process may have bound the port first.
    """
    local = f"0100007F:{port:04X}"
    inodes = set()
    with contextlib.suppress(OSError):
        for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[1] == local and fields[3] == "0A":  # 0A = LISTEN
                inodes.add(f"socket:[{fields[9]}]")
    if not inodes:
        return False
    with contextlib.suppress(OSError):
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                if os.readlink(fd) in inodes:
                    return True
    return False


class LoggedServer:
    """A server (process tree) on a free port of 127.0.0.1 whose output goes to ``log``.

    Subclasses spawn it (``_start_once``: the start-up time in ms, BenchFailure when it does not come up)
    and stop it (``stop``: the exit status, None if it had to be killed; safe to call again).
    """

    def __init__(self, log: IO[bytes]) -> None:
        self.log = log
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.restarts = 0

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}{PATH}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _start_once(self) -> float:
        raise NotImplementedError

    def stop(self) -> int | None:
        raise NotImplementedError

    def start(self) -> float:
        """Spawn and wait until it serves; returns the start-up time in ms.

        free_port() cannot reserve the port: when another process binds it first, the server exits with
        EADDRINUSE, and it is started again on a new port (up to START_ATTEMPTS times).
        """
        for attempt in range(1, START_ATTEMPTS + 1):
            try:
                return self._start_once()
            except BenchFailure:
                self.stop()
                if attempt == START_ATTEMPTS or "address already in use" not in self.output().lower():
                    raise
                self.log.seek(0)
                self.log.truncate()
                self.port = free_port()
                self.restarts += 1
        raise AssertionError("unreachable")

    def output(self) -> str:
        self.log.flush()
        self.log.seek(0)
        return self.log.read().decode(errors="replace").strip()

    def log_tail(self, lines: int = 12) -> str:
        text = self.output()
        if not text:
            return ""
        tail = "\n".join(text.splitlines()[-lines:])
        return f"\n--- server output (tail) ---\n{tail}"


class ServerProcess(LoggedServer):
    def __init__(self, spec: ServerSpec, mode: str, log: IO[bytes]) -> None:
        super().__init__(log)
        self.spec = spec
        self.mode = mode

    def _start_once(self) -> float:
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(
            self.spec.argv(self.port, self.mode),
            stdin=subprocess.DEVNULL,
            stdout=self.log,
            stderr=self.log,
            env={**os.environ, **self.spec.env},
            cwd=ROOT,
        )
        deadline = t0 + START_TIMEOUT_S
        while True:
            if self.proc.poll() is not None:
                raise BenchFailure(f"server exited during start-up (status {self.proc.returncode})")
            if listens_on(self.proc.pid, self.port):
                return (time.perf_counter() - t0) * 1e3
            if time.perf_counter() > deadline:
                raise BenchFailure(f"server did not listen on port {self.port} within {START_TIMEOUT_S:g} s")
            time.sleep(0.02)

    def stop(self) -> int | None:
        """SIGTERM, wait, SIGKILL on timeout. Returns the exit status (None if it had to be killed)."""
        proc = self.proc
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                return proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                return None
        return proc.returncode


# ----------------------------------------------------------------------------------------------- runs


@dataclass
class UnitResult:
    """One server process: one (server, mode) pair in one repetition."""

    start_ms: float
    rss_start_kib: int
    hwm_end_kib: int
    runs: dict[int, WrkResult]
    notes: list[str]


@dataclass(frozen=True)
class Settings:
    duration_s: int
    warmup_s: int
    reps: int
    conns: tuple[int, ...]
    modes: tuple[str, ...]
    seed: int


_log_dir: Path | None = None


def keep_log(name: str, text: str) -> Path:
    """Save a server's output (the first time: in a new temporary directory) and return its path."""
    global _log_dir
    if _log_dir is None:
        _log_dir = Path(tempfile.mkdtemp(prefix="http_bench_logs_"))
    path = _log_dir / name
    path.write_text(text + "\n")
    return path


def run_phases(
    server: LoggedServer,
    client: httpx.Client,
    cfg_conns: Sequence[int],
    warmup_s: int,
    duration_s: int,
    rng: random.Random,
    with_session: bool,
    measure: Callable[[int, int, str | None], R],
) -> tuple[dict[int, R], list[str]]:
    """An untimed warm-up run (when ``warmup_s`` > 0), then one run per connection count in shuffled order,
    each ``measure(conns, seconds, session)`` in a fresh session when ``with_session``. Returns the runs by
    connection count and the failures; stops at the first failure that took the server down."""
    order = list(cfg_conns)
    rng.shuffle(order)
    phases = [("warm-up", WARMUP_CONNS, warmup_s)] if warmup_s > 0 else []
    phases += [("run", c, duration_s) for c in order]
    runs: dict[int, R] = {}
    failures: list[str] = []
    for phase, conns, seconds in phases:
        try:
            session = open_session(client, server.url) if with_session else None
            result = measure(conns, seconds, session)
            if session is not None:
                close_session(client, server.url, session)
        except (BenchFailure, httpx.HTTPError) as exc:
            alive = server.alive
            failures.append(f"{phase} c={conns}: {exc}{'' if alive else server.log_tail()}")
            if not alive:
                break
            continue
        if phase == "run":
            runs[conns] = result
    return runs, failures


def stop_notes(server: LoggedServer, rc: int | None, log_name: str) -> list[str]:
    """Notes on a stopped server: an unexpected exit status, restarts, its output (kept as ``log_name``)."""
    notes: list[str] = []
    if rc not in (0, -signal.SIGTERM):  # plain uvicorn re-raises SIGTERM after a clean shutdown
        notes.append(f"exit status after SIGTERM: {rc if rc is not None else 'killed after timeout'}")
    if server.restarts:
        notes.append(f"restarted {server.restarts}x on a new port (EADDRINUSE at start-up)")
    output = server.output()
    if output:
        kept = keep_log(log_name, output)
        first = output.splitlines()[0]
        notes.append(f"server output: {len(output)} chars in `{kept}`, first line: {first[:120]!r}")
    return notes


def run_unit(
    wrk: str, spec: ServerSpec, mode: Mode, cfg: Settings, rng: random.Random, rep: int
) -> tuple[UnitResult | None, list[str]]:
    """Start the server, warm it up, run every connection count; returns the result and any failures."""
    with tempfile.TemporaryFile() as log, httpx.Client(timeout=10.0) as client:
        server = ServerProcess(spec, mode.name, log)
        failures: list[str] = []

        def measure(conns: int, seconds: int, session: str | None) -> WrkResult:
            return run_wrk(wrk, server.url, conns, seconds, mode.era, session, server.pid)

        try:
            start_ms = server.start()
            rss_start = proc_status_kib(server.pid)["VmRSS"]
            runs, failures = run_phases(
                server, client, cfg.conns, cfg.warmup_s, cfg.duration_s, rng, mode.session, measure
            )
            hwm = proc_status_kib(server.pid)["VmHWM"] if server.alive else 0
        except BenchFailure as exc:
            server.stop()
            failures.append(f"{exc}{server.log_tail()}")
            return None, failures
        finally:
            rc = server.stop()
        notes = stop_notes(server, rc, f"{spec.name}_{mode.name}_rep{rep}.log")
        unit = UnitResult(start_ms, rss_start, hwm, runs, notes)
        return unit, failures


@dataclass
class CellStats:
    """Every repetition of one (server, mode) pair."""

    units: list[UnitResult] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def runs(self, conns: int) -> list[WrkResult]:
        return [u.runs[conns] for u in self.units if conns in u.runs]

    def median(self, conns: int, get: Callable[[WrkResult], float]) -> float | None:
        values = [get(r) for r in self.runs(conns)]
        return statistics.median(values) if values else None

    def unit_median(self, get: Callable[[UnitResult], float]) -> float | None:
        values = [get(u) for u in self.units if u.hwm_end_kib]
        return statistics.median(values) if values else None


def bench(wrk: str, specs: Sequence[ServerSpec], cfg: Settings) -> dict[tuple[str, str], CellStats]:
    stats = {(s.name, m): CellStats() for s in specs for m in cfg.modes if s.supports(m)}
    rng = random.Random(cfg.seed)
    pairs = [(s, MODES[m]) for s in specs for m in cfg.modes if s.supports(m)]
    for rep in range(1, cfg.reps + 1):
        order = list(pairs)
        rng.shuffle(order)
        print(f"rep {rep}/{cfg.reps}: {len(order)} server processes", file=sys.stderr, flush=True)
        for spec, mode in order:
            t0 = time.perf_counter()
            unit, failures = run_unit(wrk, spec, mode, cfg, rng, rep)
            cell = stats[(spec.name, mode.name)]
            for failure in failures:
                cell.failures.append(f"rep {rep}: {failure}")
                print(f"  {spec.name:8} {mode.name:14} FAILED: {failure}", file=sys.stderr, flush=True)
            if unit is None:
                continue
            cell.units.append(unit)
            parts = [
                f"c={c}: {r.rps:8,.0f}/s p50 {r.p50_ms:6.2f} p99 {r.p99_ms:7.2f} ms "
                f"cpu {r.server_cpu_us:5.0f} us"
                for c, r in sorted(unit.runs.items())
            ]
            print(
                f"  {spec.name:8} {mode.name:14} start {unit.start_ms:6.0f} ms  peak rss "
                f"{unit.hwm_end_kib / 1024:5.1f} MiB  ({time.perf_counter() - t0:4.1f} s)\n    "
                + "\n    ".join(parts),
                file=sys.stderr,
                flush=True,
            )
    return stats


# -------------------------------------------------------------------------------------------- report

# performance-anchors.md section 3 (median req/s of 3 x 5 s, wrk -t1, same 2-vCPU machine class).
ANCHORS: dict[str, dict[int, int]] = {
    "floor-py (uvicorn, h11)": {1: 7_130, 16: 9_000, 64: 10_014},
    "mcp-sdk stateful, SSE (default)": {1: 1_112, 16: 899, 64: 886},
    "mcp-sdk stateful, JSON": {1: 1_844, 16: 1_884, 64: 1_822},
    "mcp-sdk stateless, JSON": {1: 1_469, 16: 1_550, 64: 1_370},
    "fastmcp stateful, SSE (default)": {1: 859, 16: 690, 64: 595},
    "fastmcp stateful, JSON": {1: 1_330, 16: 1_148, 64: 1_237},
    "fastmcp stateless, JSON": {1: 1_033, 16: 838, 64: 861},
    "ts-sdk stateful, SSE (default)": {1: 3_491, 16: 6_105, 64: 5_943},
    "ts-sdk stateful, JSON": {1: 3_274, 16: 5_505, 64: 4_849},
    "ts-sdk stateless, JSON": {1: 1_926, 16: 2_316, 64: 2_175},
}


def summary(stats: dict[tuple[str, str], CellStats]) -> dict[tuple[str, str, int], float | None]:
    """Median req/s per (server, mode, connections), for run_all's targets."""
    out: dict[tuple[str, str, int], float | None] = {}
    for (name, mode), cell in stats.items():
        for conns in {r for u in cell.units for r in u.runs}:
            out[(name, mode, conns)] = cell.median(conns, lambda r: r.rps)
    return out


def render_report(
    stats: dict[tuple[str, str], CellStats],
    cfg: Settings,
    machine: list[str],
    names: Sequence[str],
    title_level: str = "#",
) -> str:
    h2 = title_level + "#"
    lines = report_head("HTTP: Streamable HTTP `tools/call` with wrk", machine, title_level)
    add = lines.append
    add(
        f"wrk -t1, {cfg.duration_s} s per run after a {cfg.warmup_s} s warm-up run (c={WARMUP_CONNS}) "
        "per server process; every response checked by the Lua hook; (server, mode) processes interleaved "
        "in shuffled order and connection counts shuffled within each process; cells are medians over the "
        f"successful repetitions (`runs`, out of {cfg.reps}). `vs floor` = floor req/s / server req/s "
        "(higher = further from the floor). Peak RSS = VmHWM of the server process after its last run. "
        "`not supported` = the server has no such mode (the TS SDK 1.x speaks no 2026-07-28 requests)."
    )
    add("")
    add(f"{h2} Modes")
    add("")
    add("| mode | meaning | " + " | ".join(names) + " |")
    add("|---|---|" + "---|" * len(names))
    for m in cfg.modes:
        mode = MODES[m]
        cells = [
            mode.servers.get(n.removesuffix("-asyncio"), "not supported")
            if m in HTTP_MODES[n]
            else "not supported"
            for n in names
        ]
        add(f"| `{m}` | {mode.label} | " + " | ".join(cells) + " |")
    add("")
    add(
        "Legacy modes send `MCP-Protocol-Version: 2025-11-25` and the session's `Mcp-Session-Id`; modern "
        f"modes send `MCP-Protocol-Version: {MODERN_VERSION}`, `Mcp-Method: tools/call`, `Mcp-Name: echo` "
        "and `params._meta` with `io.modelcontextprotocol/protocolVersion`, `.../clientCapabilities` and "
        "`.../clientInfo`, and no session. Response shapes differ (performance-anchors.md): `mcp` adds "
        "`structuredContent`, fastmcp also `_meta.fastmcp`, the TS SDK returns `content` only."
    )
    add("")

    add(f"{h2} Results (median req/s)")
    add("")
    head = "| server | mode | runs |"
    sep = "|---|---|---|"
    for c in cfg.conns:
        head += f" c={c} req/s | c={c} p50 / p99 ms | c={c} vs floor |"
        sep += "---|---|---|"
    head += " peak RSS MiB | start-up ms |"
    sep += "---|---|"
    add(head)
    add(sep)
    for m in cfg.modes:
        for name in names:
            cell = stats.get((name, m))
            if cell is None:
                continue
            floor = stats.get(("floor-py", m))
            row = f"| **{name}** | `{m}` | {len(cell.units)}/{cfg.reps} |"
            for c in cfg.conns:
                rps = cell.median(c, lambda r: r.rps)
                floor_rps = floor.median(c, lambda r: r.rps) if floor else None
                p50 = cell.median(c, lambda r: r.p50_ms)
                p99 = cell.median(c, lambda r: r.p99_ms)
                row += f" {fmt(rps)} | {fmt(p50, 2)} / {fmt(p99, 2)} | {ratio(floor_rps, rps)} |"
            row += f" {fmt(_mib(cell.unit_median(lambda u: u.hwm_end_kib)), 1)} |"
            row += f" {fmt(cell.unit_median(lambda u: u.start_ms))} |"
            add(row)
    add("")

    if "mcpkit" in names:
        others = [n for n in names if n != "mcpkit"]
        add(f"{h2} Ratios: mcpkit req/s ÷ each peer's req/s")
        add("")
        add(
            "Quotients of the medians, same mode and connection count (> 1: mcpkit is faster; against the "
            "floor, < 1 is how close mcpkit comes to it). `n/a`: the peer has no such mode."
        )
        add("")
        add("| mode | c | mcpkit req/s | " + " | ".join(f"÷ {o}" for o in others) + " |")
        add("|---|---|---|" + "---|" * len(others))
        for m in cfg.modes:
            mk = stats.get(("mcpkit", m))
            if mk is None:
                continue
            for c in cfg.conns:
                mr = mk.median(c, lambda r: r.rps)
                cells = []
                for o in others:
                    oc = stats.get((o, m))
                    cells.append(ratio(mr, oc.median(c, lambda r: r.rps)) if oc else "n/a")
                add(f"| `{m}` | {c} | {fmt(mr)} | " + " | ".join(cells) + " |")
        add("")

    add(f"{h2} Server CPU per request")
    add("")
    add(
        f"utime+stime of the server process over each wrk run, divided by the requests it answered (µs; "
        f"tick = {1e3 / CLK_TCK:g} ms). On this 2-vCPU machine wrk takes one core, so a server near "
        "1,000,000 / (req/s) µs per request is CPU-bound on the other. Bytes per response = what wrk read "
        "(status line, headers, body) / responses."
    )
    add("")
    add(
        "| server | mode | "
        + " | ".join(f"c={c} CPU µs/req" for c in cfg.conns)
        + " | RSS after start-up MiB | bytes per response |"
    )
    add("|---|---|" + "---|" * len(cfg.conns) + "---|---|")
    for m in cfg.modes:
        for name in names:
            cell = stats.get((name, m))
            if cell is None:
                continue
            cpu = " | ".join(fmt(cell.median(c, lambda r: r.server_cpu_us)) for c in cfg.conns)
            rss = fmt(_mib(cell.unit_median(lambda u: u.rss_start_kib)), 1)
            sizes = [r.resp_bytes for c in cfg.conns for r in cell.runs(c)]
            size = fmt(statistics.median(sizes)) if sizes else "n/a"
            add(f"| {name} | `{m}` | {cpu} | {rss} | {size} |")
    add("")

    add(f"{h2} Per-repetition req/s")
    add("")
    add("| server | mode | " + " | ".join(f"c={c}" for c in cfg.conns) + " |")
    add("|---|---|" + "---|" * len(cfg.conns))
    for m in cfg.modes:
        for name in names:
            cell = stats.get((name, m))
            if cell is None:
                continue
            per = " | ".join(" / ".join(fmt(r.rps) for r in cell.runs(c)) or "n/a" for c in cfg.conns)
            add(f"| {name} | `{m}` | {per} |")
    add("")

    add(f"{h2} Reference: anchor numbers (performance-anchors.md section 3, median req/s)")
    add("")
    add("| anchor | c=1 | c=16 | c=64 |")
    add("|---|---|---|---|")
    for label, values in ANCHORS.items():
        add(f"| {label} | {values[1]:,} | {values[16]:,} | {values[64]:,} |")
    add("")

    failures = [(f"{name} `{m}`", f) for (name, m), cell in stats.items() for f in cell.failures]
    notes = [(f"{name} `{m}`", n) for (name, m), cell in stats.items() for u in cell.units for n in u.notes]
    lines += failures_and_notes(h2, failures, notes)
    return "\n".join(lines)


def _mib(kib: float | None) -> float | None:
    return None if kib is None else kib / 1024


def machine_info(source_note: str, wrk: str, names: Sequence[str]) -> list[str]:
    pkgs = ("mcp", "mcp-types", "uvicorn", "h11", "starlette", "anyio", "pydantic", "orjson")
    loop = "uvloop" if importlib.util.find_spec("uvloop") else "asyncio"
    http = "httptools" if importlib.util.find_spec("httptools") else "h11"
    return [
        *machine_lines(),
        f"uvicorn runs with {http}; the Python peers' uvicorn picks the {loop} loop, mcpkit's the one above",
        f"packages: {versions_line(pkgs)}; mcpkit imported from: {source_note}",
        f"load generator: {wrk_version(wrk)}: `wrk -t1 -cC -dDs --timeout {WRK_TIMEOUT} "
        f"-s {LUA_SCRIPT.relative_to(ROOT)} http://127.0.0.1:PORT{PATH} -- ERA SESSION` "
        "(ERA `legacy` or `modern`; SESSION `-` for none)",
        "servers: `"
        + " | ".join(
            f"{'node' if script.endswith('.mjs') else 'python'} bench/servers/{script} PORT MODE"
            for script in (HTTP_SCRIPTS[n] for n in names)
        )
        + "` (127.0.0.1; the Python servers run one uvicorn worker with the access log off)",
    ]


# ---------------------------------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None) -> tuple[argparse.Namespace, Settings]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="quick check: mcpkit/official/floor-py, -d1s, 1 rep, c=16, json; no RESULTS.md",
    )
    parser.add_argument("--duration", type=int, default=None, help="seconds per wrk run (default 5; smoke 1)")
    parser.add_argument(
        "--warmup", type=int, default=None, help="warm-up seconds per server (default 2; smoke 0)"
    )
    parser.add_argument("--reps", type=int, default=None, help="repetitions (default 3; smoke 1)")
    parser.add_argument("--conns", type=int, nargs="+", default=None, help="connection counts (1 16 64)")
    parser.add_argument(
        "--modes",
        nargs="+",
        choices=tuple(MODES),
        default=None,
        help=f"modes (default: {' '.join(DEFAULT_MODES)})",
    )
    add_run_options(parser, install=True)
    parser.add_argument(
        "--peers",
        "--only",
        nargs="+",
        action="extend",
        choices=HTTP_PEERS,
        help="servers to run (default: all; smoke: mcpkit official floor-py)",
    )
    args = parser.parse_args(argv)
    smoke = args.smoke
    conns = tuple(args.conns or ((16,) if smoke else (1, 16, 64)))
    modes = tuple(args.modes or (("json",) if smoke else DEFAULT_MODES))
    cfg = Settings(
        duration_s=args.duration if args.duration is not None else (1 if smoke else 5),
        warmup_s=args.warmup if args.warmup is not None else (0 if smoke else 2),
        reps=args.reps if args.reps is not None else (1 if smoke else 3),
        conns=conns,
        modes=modes,
        seed=args.seed if args.seed is not None else random.randrange(2**32),
    )
    if cfg.duration_s < 1 or cfg.reps < 1 or cfg.warmup_s < 0 or any(c < 1 for c in conns):
        parser.error("--duration, --reps and --conns must be >= 1, --warmup >= 0")
    return args, cfg


def config_line(cfg: Settings) -> str:
    return (
        f"-d{cfg.duration_s}s, warm-up {cfg.warmup_s} s, reps={cfg.reps}, c={list(cfg.conns)}, "
        f"modes={list(cfg.modes)}, shuffle seed {cfg.seed}"
    )


def cells_failed(cells: Iterable[Any], conns: Sequence[int]) -> bool:
    """Whether a cell (``failures``, ``units`` with ``runs`` by connection count) had a failure, no
    successful unit, or a unit without a run at one of ``conns``."""
    cells = list(cells)
    return any(cell.failures for cell in cells) or any(
        not cell.units or any(c not in u.runs for u in cell.units for c in conns) for cell in cells
    )


def failed(stats: dict[tuple[str, str], CellStats], cfg: Settings) -> bool:
    return cells_failed(stats.values(), cfg.conns)


def main(argv: Sequence[str] | None = None) -> int:
    args, cfg = parse_args(argv)
    wrk, install_notes = ensure_wrk()
    default = CORE_PEERS if args.smoke else [p for p in HTTP_PEERS if p not in OPT_IN_PEERS]
    wanted = list(dict.fromkeys(args.peers or default))
    setup = setup_peers(wanted, install=not args.no_install)
    source = mcpkit_source(snapshot=not args.live_source)
    specs = server_specs(setup.available, source)
    names = [s.name for s in specs]
    load_before = load_average()
    t0 = time.perf_counter()
    try:
        stats = bench(wrk, specs, cfg)
    finally:
        source.cleanup()
    elapsed = time.perf_counter() - t0
    machine = [
        *machine_info(source.note, wrk, names),
        *setup.lines(),
        *install_notes,
        f"{config_line(cfg)}; wall time {elapsed:.0f} s",
        f"load average (1/5/15 min) before: {load_before}; after: {load_average()}",
    ]
    report = render_report(stats, cfg, machine, names)
    print(report)
    if failed(stats, cfg) or (setup.missing and args.peers):
        print("\nFAILED: a server did not answer correctly; RESULTS.md not written.", file=sys.stderr)
        return 1
    if not args.smoke and not args.no_write:
        write_section(SECTION, report)
        print(f"\nwrote the HTTP section of {RESULTS_PATH}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
