"""Cost curve of payload size: ``tools/call`` results and ``resources/read`` contents of 1 KiB .. 16 MiB.

Method:

* Peers (``bench/peers.py``): mcpkit, the official Python SDK (``mcp``), FastMCP (own venv) and the TypeScript
  SDK, each serving ``bench/servers/curve_*``: the tool ``text(size)`` (a text result of ``size``
  characters), the resources ``payload://text/{size}`` (text) and ``payload://blob/{size}`` (``size`` bytes,
  base64 on the wire). Every server makes its payload on each call (``"x" * size``), as a tool would.
* Transports: stdio (newline-delimited JSON-RPC written by hand with orjson from this process, one
  request at a time) and Streamable HTTP with legacy sessions in both response modes (``http-json``:
  ``application/json``; ``http-sse``: one ``text/event-stream`` per answer), with httpx.
* For each (transport, peer, kind) one fresh server process; sizes ascending: one untimed call, then
  ``calls`` sequential requests timed, every answer checked (length and content). The server's peak extra
  memory for a size is its VmHWM after that size's calls - its VmRSS after the handshake (the sizes
  ascend, so the peak is the current size's), reported as a multiple of the payload.
* Client side: a separate process per (SDK, size) runs the SDK's own client (mcpkit ``Client`` against the
  mcpkit server, ``mcp.Client`` against the official one, stdio) reading the text resource once, and prints
  its own VmHWM - VmRSS before the read.
* Every repetition runs the peers in shuffled order; figures are medians over calls of all repetitions.

Usage::

    python bench/payload_bench.py                  # all peers, 1 rep; writes its RESULTS.md section + plots
    python bench/payload_bench.py --smoke          # mcpkit/official, 1 KiB and 64 KiB, stdio + http-json,
                                                   # call-text and read-blob, 2 calls each; writes nothing
    python bench/payload_bench.py --no-write --peers mcpkit --kinds read-blob --sizes 16777216
                                                   # one point (a fresh server goes straight to 16 MiB)
"""

from __future__ import annotations

import argparse
import base64
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson
from common import (
    ROOT,
    SERVERS_DIR,
    BenchFailure,
    McpkitSource,
    add_run_options,
    fmt,
    load_average,
    machine_lines,
    mcpkit_source,
    proc_status_kib,
    report_head,
)
from http_bench import (
    LEGACY_HEADERS,
    LEGACY_VERSION,
    START_TIMEOUT_S,
    STOP_TIMEOUT_S,
    LoggedServer,
    jsonrpc_body,
)
from peers import interpreter, peer_env, setup_peers

SECTION = "payload_bench"
IMG_DIR = ROOT / "docs" / "img" / "bench"
PEERS = ("mcpkit", "official", "fastmcp", "ts-sdk")
SMOKE_PEERS = ("mcpkit", "official")
SCRIPTS = {
    "mcpkit": "curve_mcpkit.py",
    "official": "curve_official.py",
    "fastmcp": "curve_fastmcp.py",
    "ts-sdk": "curve_ts.mjs",
}
TRANSPORTS = ("stdio", "http-json", "http-sse")
KINDS = ("call-text", "read-text", "read-blob")
KIB, MIB = 1024, 1024 * 1024
SIZES = (KIB, 64 * KIB, MIB, 16 * MIB)
SMOKE_SIZES = (KIB, 64 * KIB)
#: Timed calls per size (smaller for the large payloads: each 16 MiB call costs up to a second or more).
CALLS = {KIB: 40, 64 * KIB: 20, MIB: 5, 16 * MIB: 2}
SMOKE_CALLS = 2
SMOKE_KINDS = ("call-text", "read-blob")
CALL_TIMEOUT_S = 120.0
PROTOCOL_VERSION = "2025-11-25"
HANDSHAKE_TIMEOUT_S = 180.0


def size_label(size: int) -> str:
    return f"{size // MIB} MiB" if size >= MIB else f"{size // KIB} KiB"


def curve_argv(peer: str, n: int, transport: str, port: int = 0) -> list[str]:
    argv = [interpreter(peer), str(SERVERS_DIR / SCRIPTS[peer]), str(n)]
    if transport == "stdio":
        return [*argv, "stdio"]
    return [*argv, "http", str(port), transport.removeprefix("http-")]


# -------------------------------------------------------------------------------------------- requests


def request(kind: str, size: int, request_id: int) -> dict[str, Any]:
    if kind == "call-text":
        params: dict[str, Any] = {"name": "text", "arguments": {"size": size}}
        return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
    what = "text" if kind == "read-text" else "blob"
    uri = f"payload://{what}/{size}"
    return {"jsonrpc": "2.0", "id": request_id, "method": "resources/read", "params": {"uri": uri}}


def check(kind: str, size: int, msg: dict[str, Any]) -> None:
    """A wrong or short answer raises BenchFailure."""
    result = msg.get("result")
    if not isinstance(result, dict):
        raise BenchFailure(f"{kind} {size}: no result: {str(msg)[:300]}")
    if kind == "call-text":
        content = result.get("content") or [{}]
        if result.get("isError") or content[0].get("type") != "text":
            raise BenchFailure(f"{kind} {size}: not a text result: {str(result)[:300]}")
        text = content[0].get("text", "")
    else:
        content = (result.get("contents") or [{}])[0]
        if kind == "read-blob":
            data = base64.b64decode(content.get("blob", ""), validate=True)
            if len(data) != size or data.count(0) != size:
                raise BenchFailure(f"{kind} {size}: wrong blob ({len(data)} bytes)")
            return
        text = content.get("text", "")
    if len(text) != size or text.count("x") != size:
        raise BenchFailure(f"{kind} {size}: wrong text ({len(text)} characters)")


INIT = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": PROTOCOL_VERSION,
        "capabilities": {},
        "clientInfo": {"name": "mcpkit-curve-bench", "version": "0"},
    },
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


class StdioClient:
    """A raw newline-delimited JSON-RPC client over a server's pipes (blocking, one request at a time)."""

    def __init__(self, argv: list[str], env: dict[str, str], stderr: Any) -> None:
        self.t0 = time.perf_counter()
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env={**os.environ, **env},
            cwd=ROOT,
            bufsize=1 << 20,
        )
        self.next_id = 1

    @property
    def pid(self) -> int:
        return self.proc.pid

    def handshake(self, timeout_s: float = HANDSHAKE_TIMEOUT_S) -> float:
        """``initialize`` + ``notifications/initialized``; returns spawn -> initialize answer in ms.

        A server that has not answered within ``timeout_s`` is killed (BenchFailure)."""
        watchdog = threading.Timer(timeout_s, self.proc.kill)
        watchdog.start()
        try:
            msg = self.send(INIT, 0)
        except BenchFailure as exc:
            raise BenchFailure(f"no initialize answer within {timeout_s:g} s ({exc})") from exc
        finally:
            watchdog.cancel()
        spent = (time.perf_counter() - self.t0) * 1e3
        if not isinstance(msg.get("result"), dict):
            raise BenchFailure(f"initialize: {str(msg)[:300]}")
        self.notify(INITIALIZED)
        return spent

    def notify(self, msg: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(orjson.dumps(msg) + b"\n")
        self.proc.stdin.flush()

    def send(self, msg: dict[str, Any], request_id: int) -> dict[str, Any]:
        self.notify(msg)
        assert self.proc.stdout is not None
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise BenchFailure(f"server closed stdout (exit status {self.proc.poll()})")
            answer = orjson.loads(line)
            if answer.get("id") == request_id:
                return dict(answer)

    def call(self, msg: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        return self.send({**msg, "id": self.next_id}, self.next_id)

    def close(self) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.close()
            self.proc.wait(STOP_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()


class CurveHttpServer(LoggedServer):
    """A curve server on a free port (Streamable HTTP, legacy sessions)."""

    def __init__(self, peer: str, n: int, transport: str, env: dict[str, str], log: Any) -> None:
        super().__init__(log)
        self.peer, self.n, self.transport, self.env = peer, n, transport, env

    def _start_once(self) -> float:
        from http_bench import listens_on

        t0 = time.perf_counter()
        self.proc = subprocess.Popen(
            curve_argv(self.peer, self.n, self.transport, self.port),
            stdin=subprocess.DEVNULL,
            stdout=self.log,
            stderr=self.log,
            env={**os.environ, **self.env},
            cwd=ROOT,
        )
        deadline = t0 + START_TIMEOUT_S
        while not listens_on(self.proc.pid, self.port):
            if self.proc.poll() is not None:
                raise BenchFailure(f"server exited during start-up (status {self.proc.returncode})")
            if time.perf_counter() > deadline:
                raise BenchFailure(f"server did not listen within {START_TIMEOUT_S:g} s")
            time.sleep(0.02)
        return (time.perf_counter() - t0) * 1e3

    def stop(self) -> int | None:
        proc = self.proc
        if proc is None:
            return None
        if proc.poll() is None:
            proc.terminate()
            try:
                return proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                return None
        return proc.returncode


class HttpClient:
    """A legacy session over httpx (one request at a time)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.http = httpx.Client(timeout=CALL_TIMEOUT_S)
        self.next_id = 1
        resp = self.http.post(url, json=INIT, headers=LEGACY_HEADERS)
        if resp.status_code != 200 or "mcp-session-id" not in resp.headers:
            raise BenchFailure(f"initialize: HTTP {resp.status_code}: {resp.text[:300]}")
        self.headers = {
            **LEGACY_HEADERS,
            "Mcp-Session-Id": resp.headers["mcp-session-id"],
            "MCP-Protocol-Version": LEGACY_VERSION,
        }
        note = self.http.post(url, json=INITIALIZED, headers=self.headers)
        if note.status_code != 202:
            raise BenchFailure(f"notifications/initialized: HTTP {note.status_code}")

    def call(self, msg: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        resp = self.http.post(
            self.url, content=orjson.dumps({**msg, "id": self.next_id}), headers=self.headers
        )
        if resp.status_code != 200:
            raise BenchFailure(f"HTTP {resp.status_code}: {resp.text[:300]}")
        return jsonrpc_body(resp)

    def close(self) -> None:
        self.http.close()


# ---------------------------------------------------------------------------------------------- results


@dataclass
class Cell:
    """One (transport, peer, kind, size): every call's seconds and the worst peak extra RSS (KiB)."""

    seconds: list[float] = field(default_factory=list)
    peak_extra_kib: int = 0

    def median_ms(self) -> float | None:
        return statistics.median(self.seconds) * 1e3 if self.seconds else None

    def p99_ms(self) -> float | None:
        if not self.seconds:
            return None
        xs = sorted(self.seconds)
        return xs[min(len(xs) - 1, round(0.99 * (len(xs) - 1)))] * 1e3


@dataclass
class Settings:
    peers: list[str]
    transports: tuple[str, ...]
    sizes: tuple[int, ...]
    reps: int
    seed: int
    smoke: bool = False
    kinds: tuple[str, ...] = KINDS
    #: Draw the PNGs under docs/img/bench (off with --no-write: they go with the RESULTS.md section).
    plots: bool = True

    def calls(self, size: int) -> int:
        return SMOKE_CALLS if self.smoke else CALLS.get(size, 2)


@dataclass
class Stats:
    cells: dict[tuple[str, str, str, int], Cell] = field(default_factory=dict)
    client: dict[tuple[str, int], int] = field(default_factory=dict)  # (sdk, size) -> peak extra KiB
    failures: list[tuple[str, str]] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)


def measure_server(
    client: StdioClient | HttpClient, pid: int, key: tuple[str, str, str], cfg: Settings, st: Stats
) -> None:
    """Every size of one kind, ascending, in one fresh server: VmHWM - the idle RSS after the handshake."""
    kind = key[2]
    idle = proc_status_kib(pid)["VmRSS"]
    for size in cfg.sizes:
        cell = st.cells.setdefault((*key, size), Cell())
        msg = request(kind, size, 0)
        check(kind, size, client.call(msg))  # warm-up, untimed
        for _ in range(cfg.calls(size)):
            t0 = time.perf_counter()
            answer = client.call(msg)
            cell.seconds.append(time.perf_counter() - t0)
            check(kind, size, answer)
            del answer
        cell.peak_extra_kib = max(cell.peak_extra_kib, proc_status_kib(pid)["VmHWM"] - idle)


def run_unit(transport: str, peer: str, kind: str, source: McpkitSource, cfg: Settings, st: Stats) -> None:
    env = peer_env(peer, source)
    key = (transport, peer, kind)
    with tempfile.TemporaryFile() as log:
        if transport == "stdio":
            client = StdioClient(curve_argv(peer, 0, "stdio"), env, log)
            try:
                client.handshake()
                measure_server(client, client.pid, key, cfg, st)
            finally:
                client.close()
            return
        server = CurveHttpServer(peer, 0, transport, env, log)
        try:
            server.start()
            http = HttpClient(server.url)
            try:
                measure_server(http, server.pid, key, cfg, st)
            finally:
                http.close()
        except BenchFailure as exc:
            raise BenchFailure(f"{exc}{server.log_tail()}") from exc
        finally:
            server.stop()


CLIENT_SCRIPT = {
    # Each prints its own VmHWM - VmRSS (KiB) around its first read of the text resource through its SDK's
    # client (after a warm-up without a payload: memory freed after a large read would be reused).
    "mcpkit": """
import asyncio, sys
from pathlib import Path
from mcpkit import Client
from mcpkit.client.options import ClientOptions
def kib(key):
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
async def main(argv, size):
    # (the client's default limit is 16 MiB per message: a 16 MiB payload needs more)
    options = ClientOptions(max_message_bytes=64 << 20)
    async with Client.stdio(argv[0], argv[1:], options=options) as client:
        await client.list_tools()  # warm-up (no payload: memory freed after one would be reused)
        Path("/proc/self/clear_refs").write_text("5")
        before = kib("VmRSS")
        result = await client.read_resource(f"payload://text/{size}")
        assert len(result.contents[0].text) == size
        print(kib("VmHWM") - before)
asyncio.run(main(sys.argv[2:], int(sys.argv[1])))
""",
    "official": """
import sys
from pathlib import Path
import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
def kib(key):
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
async def main(argv, size):
    params = StdioServerParameters(command=argv[0], args=argv[1:])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        await session.list_tools()
        Path("/proc/self/clear_refs").write_text("5")
        before = kib("VmRSS")
        result = await session.read_resource(f"payload://text/{size}")
        assert len(result.contents[0].text) == size
        print(kib("VmHWM") - before)
anyio.run(main, sys.argv[2:], int(sys.argv[1]))
""",
}


def measure_client(sdk: str, size: int, source: McpkitSource) -> int:
    env = {**os.environ, **peer_env("mcpkit", source)}
    argv = [sys.executable, "-c", CLIENT_SCRIPT[sdk], str(size), *curve_argv(sdk, 0, "stdio")]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT, timeout=300, check=False)
    if done.returncode != 0:
        raise BenchFailure(f"{sdk} client: {done.stderr.strip()[-600:]}")
    return int(done.stdout.split()[-1])


def bench(cfg: Settings, source: McpkitSource) -> Stats:
    st = Stats()
    rng = random.Random(cfg.seed)
    for _ in range(cfg.reps):
        units = [(t, p, k) for t in cfg.transports for p in cfg.peers for k in cfg.kinds]
        rng.shuffle(units)
        for transport, peer, kind in units:
            print(f"  payload {transport} {peer} {kind} (load {load_average()})", file=sys.stderr, flush=True)
            try:
                run_unit(transport, peer, kind, source, cfg, st)
            except (BenchFailure, OSError, httpx.HTTPError, subprocess.SubprocessError) as exc:
                st.failures.append((f"{peer} {transport} {kind}", f"{type(exc).__name__}: {exc}"))
        for sdk in rng.sample(["mcpkit", "official"], 2):
            if sdk not in cfg.peers or (cfg.smoke and sdk != "mcpkit"):
                continue
            size = cfg.sizes[-1]
            try:
                kib = measure_client(sdk, size, source)
            except (BenchFailure, subprocess.SubprocessError, ValueError) as exc:
                st.failures.append((f"{sdk} client", str(exc)))
                continue
            st.client[(sdk, size)] = max(st.client.get((sdk, size), 0), kib)
    return st


# ----------------------------------------------------------------------------------------------- report


def summary(st: Stats) -> dict[str, Any]:
    """Figures the Targets table of run_all.py reads: peak extra RSS at the largest size, as x payload."""
    out: dict[str, Any] = {}
    largest = max((key[3] for key in st.cells), default=0)
    for (_transport, peer, _kind, size), cell in st.cells.items():
        prev = out.get(("server_x", peer))
        x = cell.peak_extra_kib * 1024 / size
        if size == largest and (prev is None or x > prev):
            out[("server_x", peer)] = x
    for (sdk, size), kib in st.client.items():
        out[("client_x", sdk)] = kib * 1024 / size
    out["size"] = size_label(largest) if largest else "16 MiB"
    return out


def render_report(st: Stats, cfg: Settings, machine: Sequence[str], title_level: str = "#") -> str:
    h2 = "#" * (len(title_level) + 1)
    lines = report_head("Cost curve: payload size", machine, title_level)
    lines += [
        "Latency of one request (median and p99 over every call of every repetition, in ms), throughput "
        "(payload MiB/s at the median), and the server's peak extra RSS while serving that size "
        "(VmHWM after the calls - VmRSS before them, as a multiple of the payload; the worst repetition). "
        "Ratios: the peer's median ÷ mcpkit's, measured in the same interleaved run (> 1: mcpkit faster).",
        "",
    ]
    for transport in cfg.transports:
        for kind in cfg.kinds:
            lines += [f"{h2} {transport}, {kind}", ""]
            lines.append(
                "| size | peer | median ms | p99 ms | MiB/s | server peak extra | x payload | vs mcpkit |"
            )
            lines.append("|---|---|---|---|---|---|---|---|")
            for size in cfg.sizes:
                base = st.cells.get((transport, "mcpkit", kind, size))
                base_ms = base.median_ms() if base else None
                for peer in cfg.peers:
                    cell = st.cells.get((transport, peer, kind, size))
                    if cell is None or not cell.seconds:
                        continue
                    med = cell.median_ms()
                    rate = size / MIB / (med / 1e3) if med else None
                    vs = f"{med / base_ms:.2f}x" if med and base_ms and peer != "mcpkit" else "-"
                    peak = cell.peak_extra_kib
                    lines.append(
                        f"| {size_label(size)} | {peer} | {fmt(med, 2)} | {fmt(cell.p99_ms(), 2)} "
                        f"| {fmt(rate, 1)} | {peak / 1024:.1f} MiB | {peak * 1024 / size:.1f} | {vs} |"
                    )
            lines.append("")
    if st.client:
        lines += [f"{h2} Client side (stdio, SDK clients, one `resources/read` of text)", ""]
        lines += ["| size | client | peak extra RSS | x payload |", "|---|---|---|---|"]
        for (sdk, size), kib in sorted(st.client.items()):
            lines.append(f"| {size_label(size)} | {sdk} | {kib / 1024:.1f} MiB | {kib * 1024 / size:.1f} |")
        lines.append("")
    if st.failures:
        lines += [f"{h2} Failures", ""]
        lines += [f"- **{what} FAILED** {text.splitlines()[0][:300]}" for what, text in st.failures]
        lines.append("")
    img = plot(st, cfg)
    if img:
        lines += [f"Plot: `{p.relative_to(ROOT)}` (shown in docs/performance.md)" for p in img] + [""]
    return "\n".join(lines)


def plot(st: Stats, cfg: Settings) -> list[Path]:
    """One PNG for latency and one for the server's peak RSS, per transport x kind; [] without matplotlib."""
    if cfg.smoke or not cfg.plots:
        return []
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    IMG_DIR.mkdir(parents=True, exist_ok=True)
    out = []
    for metric, ylabel, name in (
        ("median", "median latency (ms)", "payload_latency.png"),
        ("rss", "server peak extra RSS (MiB)", "payload_rss.png"),
    ):
        fig, axes = plt.subplots(
            len(cfg.transports), len(cfg.kinds), figsize=(13, 3.4 * len(cfg.transports)), squeeze=False
        )
        for r, transport in enumerate(cfg.transports):
            for c, kind in enumerate(cfg.kinds):
                ax = axes[r][c]
                for peer in cfg.peers:
                    xs, ys = [], []
                    for size in cfg.sizes:
                        cell = st.cells.get((transport, peer, kind, size))
                        if cell is None or not cell.seconds:
                            continue
                        xs.append(size / KIB)
                        peak_mib = max(cell.peak_extra_kib, 1) / 1024
                        ys.append(cell.median_ms() if metric == "median" else peak_mib)
                    if xs:
                        ax.plot(xs, ys, marker="o", label=peer)
                if metric == "rss":
                    sizes_kib = [size / KIB for size in cfg.sizes]
                    ax.plot(sizes_kib, [3 * k / 1024 for k in sizes_kib], "k--", lw=0.8, label="3x payload")
                ax.set_xscale("log", base=2)
                ax.set_yscale("log")
                ax.set_title(f"{transport}, {kind}", fontsize=10)
                ax.set_xlabel("payload (KiB)")
                ax.set_ylabel(ylabel, fontsize=8)
                ax.grid(True, alpha=0.3)
        axes[0][0].legend(fontsize=8)
        fig.tight_layout()
        path = IMG_DIR / name
        fig.savefig(path, dpi=80)
        plt.close(fig)
        out.append(path)
    return out


def failed(st: Stats) -> bool:
    return bool(st.failures)


def settings(
    smoke: bool,
    peers: Sequence[str],
    seed: int,
    reps: int | None = None,
    *,
    transports: Sequence[str] | None = None,
    kinds: Sequence[str] | None = None,
    sizes: Sequence[int] | None = None,
) -> Settings:
    return Settings(
        peers=[p for p in (SMOKE_PEERS if smoke else PEERS) if p in peers],
        transports=tuple(transports or (("stdio", "http-json") if smoke else TRANSPORTS)),
        sizes=tuple(sorted(sizes)) if sizes else (SMOKE_SIZES if smoke else SIZES),
        reps=reps or 1,
        seed=seed,
        smoke=smoke,
        kinds=tuple(kinds or (SMOKE_KINDS if smoke else KINDS)),
    )


def config_line(cfg: Settings) -> str:
    calls = ", ".join(f"{size_label(s)}: {cfg.calls(s)}" for s in cfg.sizes)
    return f"reps={cfg.reps}, timed calls per size and repetition ({calls}), seed {cfg.seed}"


def main(argv: Sequence[str] | None = None) -> int:
    from common import finish

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--smoke", action="store_true")
    p.add_argument("--reps", type=int, default=None)
    p.add_argument("--peers", nargs="+", choices=PEERS, default=None)
    # One point of the curve (e.g. a fresh server straight to 16 MiB, which the ladder of sizes never does).
    p.add_argument("--transports", nargs="+", choices=TRANSPORTS, default=None)
    p.add_argument("--kinds", nargs="+", choices=KINDS, default=None)
    p.add_argument("--sizes", nargs="+", type=int, default=None, help="payload sizes in bytes")
    add_run_options(p, install=True)
    a = p.parse_args(argv)
    seed = a.seed if a.seed is not None else random.randrange(2**32)
    setup = setup_peers(a.peers or (SMOKE_PEERS if a.smoke else PEERS), install=not a.no_install)
    cfg = settings(
        a.smoke, setup.available, seed, a.reps, transports=a.transports, kinds=a.kinds, sizes=a.sizes
    )
    cfg.plots = not a.no_write
    source = mcpkit_source(snapshot=not a.live_source)
    try:
        st = bench(cfg, source)
    finally:
        source.cleanup()
    machine = [*machine_lines(), config_line(cfg), *setup.lines()]
    report = render_report(st, cfg, machine)
    return finish(report, failed(st), write=not (a.no_write or a.smoke), section=SECTION, label="payload")


if __name__ == "__main__":
    sys.exit(main())
