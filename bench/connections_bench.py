"""Benchmark of connections and sessions: concurrency 1 to 1,000, idle legacy sessions, open listen streams.

Three parts (issue 18, item 3), each run on one server process per (server, part) in shuffled order:

* ``conc``: ``tools/call`` in one legacy session (JSON responses) with ``wrk -t1 -cC`` at C = 1, 10, 100,
  1,000 connections (the driver and checks of ``http_bench.py``; ``wrk_mcp_call.lua`` reports p50, p99,
  p99.9). The load generator is wrk (C, one thread): the ``floor-py`` row is a bare ASGI app on the same
  uvicorn, and what wrk drives there is the ceiling of the harness (above every MCP server measured).
* ``sessions``: N idle legacy sessions (``initialize`` + ``notifications/initialized``, 16 at a time over
  keep-alive connections), then nothing. Memory per session = (RSS after - RSS before) / N, RSS from
  ``/proc/PID/status`` after 0.5 s of quiet; a sample of the sessions then answers a ``tools/call``.
* ``streams``: N open streams, each on its own connection: ``get`` = N legacy sessions each with its
  standalone ``GET /mcp`` SSE stream (memory = RSS delta over the sessions already open, / N); ``listen``
  = N modern ``subscriptions/listen`` requests (2026-07-28; acknowledged before counted). Then a
  ``touch`` tool call raises one ``notifications/tools/list_changed``; fan-out = the time from sending that
  call to the moment the last of the N streams has read the notification, done ``--fanouts`` times (30)
  one after the other on the same streams and reported as the median and the max. Only
  mcpkit's server broadcasts a change to every session (``MCPServer.notify_list_changed``); the peers'
  list-changed notifications go to the session that asked, so their fan-out is not measured.
  The readers are one asyncio process on uvloop reading N sockets: its own turn is part of the figure.
* mcpkit runs as ``python -m mcpkit run bench/servers/mcpkit_conn.py --transport http`` (``mcpkit``) and
  with ``--workers 1 --redis URL`` (``mcpkit+redis``: sessions, GET streams and changes go through Redis).
  The peers run ``bench/servers/*_http.py PORT json``.

Usage::

    python bench/connections_bench.py            # full: all peers; c=1,10,100,1000; 10,000 sessions;
                                                 # 1,000 streams; writes its RESULTS.md section and plots
    python bench/connections_bench.py --smoke    # mcpkit/official, toy sizes, nothing written
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from statistics import median
from typing import IO, Any, cast

import httpx
from common import (
    CLK_TCK,
    ROOT,
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
    proc_status_kib,
    ratio,
    report_head,
)
from http_bench import (
    HOST,
    LEGACY_VERSION,
    MODERN_VERSION,
    PATH,
    LoggedServer,
    ServerProcess,
    ServerSpec,
    close_session,
    ensure_wrk,
    open_session,
    run_wrk,
    wrk_version,
)
from peers import CORE_PEERS, HTTP_SCRIPTS, peer_env, setup_peers
from scale_bench import NO_REDIS, ScaleServer, redis_for_bench

SECTION = "connections_bench"
CONN_SCRIPT = "bench/servers/mcpkit_conn.py"
MCPKIT_ROWS = ("mcpkit", "mcpkit+redis")
ALL_ROWS = ("mcpkit", "mcpkit+redis", "official", "fastmcp", "ts-sdk", "floor-py")
SMOKE_ROWS = ("mcpkit", "mcpkit+redis", "official")
PARTS = ("conc", "sessions", "streams")
STREAM_KINDS = ("get", "listen")
SETTLE_S = 0.5
OPEN_PARALLEL = 16
STREAM_TIMEOUT_S = 30.0
#: Change notifications timed per stream kind (one after the other, on the same open streams). One
#: sample was a lottery: with 1,000 streams open a full collection of the garbage collector lands in
#: one fan-out in 20-25 (issue 18: seen at the 1st, 20th, 25th-27th of 30), and the table showed it
#: or not by chance; 30 cover that period.
FANOUTS = 30


# ------------------------------------------------------------------------------------- raw HTTP client


class RawHTTP:
    """One HTTP/1.1 keep-alive connection, written and read by hand (cheap enough for thousands)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, port: int) -> None:
        self.reader, self.writer, self.port = reader, writer, port

    @classmethod
    async def open(cls, port: int) -> RawHTTP:
        reader, writer = await asyncio.open_connection(HOST, port, limit=1 << 22)
        return cls(reader, writer, port)

    def send(self, method: str, headers: dict[str, str], body: bytes | None = None) -> None:
        lines = [f"{method} {PATH} HTTP/1.1", f"Host: {HOST}:{self.port}"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        if body is not None:
            lines.append(f"Content-Length: {len(body)}")
        self.writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + (body or b""))

    async def head(self) -> tuple[int, dict[str, str]]:
        raw = await self.reader.readuntil(b"\r\n\r\n")
        first, *rest = raw.decode("latin-1").split("\r\n")
        headers = {}
        for line in rest:
            if line:
                k, _, v = line.partition(":")
                headers[k.strip().lower()] = v.strip()
        return int(first.split()[1]), headers

    async def chunk(self) -> bytes:
        """The next chunk of a chunked body (b"" at its end)."""
        size = int((await self.reader.readuntil(b"\r\n")).split(b";")[0], 16)
        data = await self.reader.readexactly(size + 2)
        return data[:-2]

    async def body(self, headers: dict[str, str]) -> bytes:
        if "content-length" in headers:
            return await self.reader.readexactly(int(headers["content-length"]))
        if headers.get("transfer-encoding", "").lower() == "chunked":
            parts = []
            while part := await self.chunk():
                parts.append(part)
            return b"".join(parts)
        return b""

    async def request(
        self, method: str, headers: dict[str, str], body: bytes | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        self.send(method, headers, body)
        status, got = await self.head()
        return status, got, await self.body(got)

    def close(self) -> None:
        self.writer.close()


def rpc_message(body: bytes) -> dict[str, Any]:
    """The last JSON-RPC message of a JSON or SSE body."""
    text = body.decode()
    if text.lstrip().startswith("{"):
        msg = json.loads(text)
    else:
        datas = [ln[5:].strip() for ln in text.splitlines() if ln.startswith("data:") and ln[5:].strip()]
        if not datas:
            raise BenchFailure(f"no JSON-RPC message in {text[:200]!r}")
        msg = json.loads(datas[-1])
    if not isinstance(msg, dict):
        raise BenchFailure(f"non-object message {text[:200]!r}")
    return msg


LEGACY = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "connections-bench", "version": "0"},
}


def modern_headers(method: str, name: str | None = None) -> dict[str, str]:
    h = {**LEGACY, "MCP-Protocol-Version": MODERN_VERSION, "Mcp-Method": method}
    return {**h, "Mcp-Name": name} if name else h


def call_body(rid: int, tool: str, arguments: dict[str, Any], modern: bool = False) -> bytes:
    params: dict[str, Any] = {"name": tool, "arguments": arguments}
    if modern:
        params["_meta"] = MODERN_META
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}).encode()


async def raw_session(conn: RawHTTP) -> str:
    """``initialize`` + ``notifications/initialized`` on ``conn``; the session id."""
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": LEGACY_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "connections-bench", "version": "0"},
        },
    }
    status, headers, body = await conn.request("POST", LEGACY, json.dumps(init).encode())
    msg = rpc_message(body) if status == 200 else {}
    sid = headers.get("mcp-session-id")
    if status != 200 or "result" not in msg or not sid:
        raise BenchFailure(f"initialize: HTTP {status} {body[:200]!r}")
    h = {**LEGACY, "Mcp-Session-Id": sid, "MCP-Protocol-Version": LEGACY_VERSION}
    note = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode()
    status, _, body = await conn.request("POST", h, note)
    if status != 202:
        raise BenchFailure(f"notifications/initialized: HTTP {status} {body[:200]!r}")
    return sid


async def open_sessions(port: int, n: int) -> list[str]:
    sessions: list[str] = []
    todo = iter(range(n))

    async def worker() -> None:
        conn = await RawHTTP.open(port)
        try:
            for _ in todo:
                sessions.append(await raw_session(conn))
        finally:
            conn.close()

    await asyncio.gather(*(worker() for _ in range(min(OPEN_PARALLEL, n))))
    return sessions


def check_echo(status: int, body: bytes, rid: int) -> None:
    msg = rpc_message(body) if status == 200 else {}
    content = (msg.get("result") or {}).get("content") or [{}]
    if status != 200 or msg.get("id") != rid or content[0].get("text") != "ping":
        raise BenchFailure(f"tools/call answered HTTP {status} {body[:200]!r}")


async def check_sessions(port: int, sessions: Sequence[str], rng: random.Random) -> None:
    conn = await RawHTTP.open(port)
    try:
        for i, sid in enumerate(rng.sample(list(sessions), min(5, len(sessions)))):
            h = {**LEGACY, "Mcp-Session-Id": sid, "MCP-Protocol-Version": LEGACY_VERSION}
            status, _, body = await conn.request("POST", h, call_body(100 + i, "echo", {"text": "ping"}))
            check_echo(status, body, 100 + i)
    finally:
        conn.close()


# --------------------------------------------------------------------------------------------- servers


class ConnServer(ScaleServer):
    """mcpkit through ``mcpkit run`` (its CLI), with or without ``--workers 1 --redis URL``."""

    def argv(self) -> list[str]:
        argv = [sys.executable, "-m", "mcpkit", "run", CONN_SCRIPT, "--transport", "http"]
        argv += ["--port", str(self.port)]
        return argv if self.workers == NO_REDIS else [*argv, "--workers", "1", "--redis", self.redis_url]


def make_server(row: str, source: McpkitSource, redis_url: str, log: IO[bytes]) -> LoggedServer:
    if row in MCPKIT_ROWS:
        return ConnServer(NO_REDIS if row == "mcpkit" else 1, redis_url, source, log)
    return ServerProcess(ServerSpec(row, peer_env(row, source)), "json", log)


def rss_kib(pid: int) -> int:
    return proc_status_kib(pid)["VmRSS"]


async def settled_rss(pid: int) -> int:
    await asyncio.sleep(SETTLE_S)
    return rss_kib(pid)


# ------------------------------------------------------------------------------------------------ parts


@dataclass
class Settings:
    rows: tuple[str, ...]
    parts: tuple[str, ...]
    levels: tuple[int, ...]
    duration_s: int
    sessions: int
    streams: int
    seed: int
    redis_url: str = ""
    smoke: bool = False
    fanouts: int = FANOUTS
    gc_trace: bool = False


@dataclass
class Result:
    conc: dict[int, Any] = field(default_factory=dict)  # level -> WrkResult
    session_kib: float | None = None
    stream_kib: dict[str, float] = field(default_factory=dict)
    # kind -> (median, max) over the fan-outs of the time until the last stream had the change
    fanout_ms: dict[str, tuple[float, float]] = field(default_factory=dict)
    # kind -> (median, max) of the server's CPU over each fan-out
    fanout_cpu_ms: dict[str, tuple[float, float]] = field(default_factory=dict)
    # kind -> (p50, last, server CPU) of each fan-out
    fanout_rounds: dict[str, list[tuple[float, float, float]]] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def part_conc(wrk: str, server: LoggedServer, cfg: Settings, rng: random.Random, res: Result) -> None:
    with httpx.Client(timeout=10.0) as client:
        session = open_session(client, server.url)
        if not cfg.smoke:
            run_wrk(wrk, server.url, 16, 1, "legacy", session, server.pid)  # warm-up, checked
        levels = list(cfg.levels)
        rng.shuffle(levels)
        for c in levels:
            try:
                res.conc[c] = run_wrk(wrk, server.url, c, cfg.duration_s, "legacy", session, server.pid)
            except BenchFailure as exc:
                if not server.alive:
                    raise
                res.notes.append(f"c={c}: {str(exc).splitlines()[0]}")
        close_session(client, server.url, session)


async def part_sessions(server: LoggedServer, cfg: Settings, rng: random.Random, res: Result) -> None:
    # The first session's lazy imports are not per-session memory; it is one of the N (mcpkit's
    # default max_sessions is 10,000: the server then holds exactly N).
    await open_sessions(server.port, 1)
    before = await settled_rss(server.pid)
    n = cfg.sessions - 1
    sessions = await open_sessions(server.port, n)
    after = await settled_rss(server.pid)
    if len(set(sessions)) != n:
        raise BenchFailure(f"{n} initializes gave {len(set(sessions))} distinct session ids")
    await check_sessions(server.port, sessions, rng)
    res.session_kib = (after - before) / n


MARK = b"notifications/tools/list_changed"


async def _read_until(conn: RawHTTP, mark: bytes, seen: bytes = b"") -> bytes:
    """Read a chunked SSE body until ``mark`` is in it; the bytes read after it."""
    buf = seen
    while mark not in buf:
        part = await conn.chunk()
        if not part:
            raise BenchFailure(f"stream ended before {mark.decode()!r}")
        buf += part
    return buf[buf.index(mark) + len(mark) :]


RETRIES: list[str] = []  # 503 + Retry-After answers met while opening streams (retried, as a client would)


async def open_retrying(opener: Any, *args: Any) -> RawHTTP:
    """``opener(*args)``, again after the Retry-After of a 503 (at most 5 times)."""
    for attempt in range(6):
        try:
            return cast(RawHTTP, await opener(*args))
        except Busy as exc:
            if attempt == 5:
                raise BenchFailure(f"still 503 after 5 retries: {exc}") from None
            RETRIES.append(str(exc))
            await asyncio.sleep(exc.retry_after)
    raise AssertionError("unreachable")


class Busy(BenchFailure):
    """A 503 with Retry-After."""

    def __init__(self, what: str, retry_after: float) -> None:
        super().__init__(what)
        self.retry_after = retry_after


async def check_stream_head(conn: RawHTTP, what: str) -> None:
    status, headers = await conn.head()
    if status == 503 and "retry-after" in headers:
        body = await conn.body(headers)
        conn.close()
        raise Busy(f"{what}: 503 {body[:120]!r}", float(headers["retry-after"]))
    if status != 200 or not headers.get("content-type", "").startswith("text/event-stream"):
        raise BenchFailure(f"{what}: HTTP {status} {headers}")


async def open_get(port: int, sid: str) -> RawHTTP:
    conn = await RawHTTP.open(port)
    conn.send(
        "GET", {"Accept": "text/event-stream", "Mcp-Session-Id": sid, "MCP-Protocol-Version": LEGACY_VERSION}
    )
    await check_stream_head(conn, "GET stream")
    return conn


async def open_listen(port: int, rid: int) -> RawHTTP:
    conn = await RawHTTP.open(port)
    params = {"notifications": {"toolsListChanged": True}, "_meta": MODERN_META}
    body = json.dumps({"jsonrpc": "2.0", "id": rid, "method": "subscriptions/listen", "params": params})
    conn.send("POST", modern_headers("subscriptions/listen"), body.encode())
    await check_stream_head(conn, "subscriptions/listen")
    await _read_until(conn, b"notifications/subscriptions/acknowledged")
    return conn


async def gather_limited(coros: Sequence[Any], limit: int = OPEN_PARALLEL) -> list[Any]:
    sem = asyncio.Semaphore(limit)

    async def one(c: Any) -> Any:
        async with sem:
            return await c

    return list(await asyncio.gather(*(one(c) for c in coros)))


async def gc_report(port: int, **args: bool) -> dict[str, Any]:
    """The ``gc_report`` tool of the server's opt-in GC diagnostic (``--gc-trace``), in a modern request."""
    conn = await RawHTTP.open(port)
    try:
        status, _, body = await conn.request(
            "POST", modern_headers("tools/call", "gc_report"), call_body(9, "gc_report", args, modern=True)
        )
    finally:
        conn.close()
    result = rpc_message(body).get("result") or {}
    if status != 200 or "structuredContent" not in result:
        raise BenchFailure(f"gc_report: HTTP {status} {body[:200]!r}")
    return cast(dict[str, Any], result["structuredContent"])


def gc_line(what: str, report: dict[str, Any]) -> str:
    top = ", ".join(f"{name} {n:,}" for name, n in report["top"][:8])
    return f"{what}: {report['objects']:,} objects tracked (by generation {report['by_gen']}); {top}"


def per_stream(kind: str, before: dict[str, Any], after: dict[str, Any], n: int) -> str:
    """What the collector tracks per stream (the growth of the census's most common types, / n)."""
    was = dict(before["top"])
    grown = sorted(((k, v - was.get(k, 0)) for k, v in after["top"]), key=lambda kv: -kv[1])
    cells = ", ".join(f"{k} {v / n:.1f}" for k, v in grown if v / n >= 0.5)
    return f"{kind}: tracked objects per stream {(after['objects'] - before['objects']) / n:.1f}: {cells}"


async def part_streams(server: LoggedServer, row: str, kind: str, cfg: Settings, res: Result) -> None:
    n = cfg.streams
    port = server.port
    trace = cfg.gc_trace and row in MCPKIT_ROWS
    if trace:
        first = await gc_report(port, census=True)
        res.notes.append(gc_line(f"{kind}: before", first))
    sessions = await open_sessions(port, n) if kind == "get" else []
    before = await settled_rss(server.pid)
    if kind == "get":
        conns = await gather_limited([open_retrying(open_get, port, sid) for sid in sessions])
    else:
        conns = await gather_limited([open_retrying(open_listen, port, 1000 + i) for i in range(n)])
    if RETRIES:
        res.notes.append(
            f"{kind}: {len(RETRIES)} stream opens answered 503 + Retry-After and were retried "
            f"(first: {RETRIES[0]})"
        )
        RETRIES.clear()
    try:
        after = await settled_rss(server.pid)
        res.stream_kib[kind] = (after - before) / n
        if row not in MCPKIT_ROWS:
            return
        sid = (await open_sessions(port, 1))[0] if kind == "get" else ""
        left = [b""] * len(conns)  # what each stream read past the last notification
        for round_ in range(cfg.fanouts):
            if trace:
                await gc_report(port)  # forget the collections so far
            p50, last, cpu, t0 = await one_fanout(server, kind, sid, conns, left)
            res.fanout_rounds.setdefault(kind, []).append((p50, last, cpu))
            if trace:
                report = await gc_report(port, census=round_ == 0)
                inside = [c for c in report["collections"] if t0 <= c["start"] <= t0 + last / 1e3]
                gcs = (
                    ", ".join(f"gen {c['gen']} {c['ms']:.1f} ms ({c['collected']} freed)" for c in inside)
                    or "none"
                )
                res.notes.append(
                    f"{kind} fan-out {round_ + 1}: last {last:.1f} ms, server CPU {fmt(cpu)} ms; "
                    f"collections inside: {gcs} "
                    f"(all since the previous: {len(report['collections'])})"
                )
                if round_ == 0:
                    res.notes.append(gc_line(f"{kind}: streams open", report))
                    res.notes.append(per_stream(kind, first, report, n))
        rounds = res.fanout_rounds[kind]
        res.notes.append(
            f"{kind} fan-outs in order, last stream ms: " + " ".join(f"{r[1]:.0f}" for r in rounds)
        )
        res.fanout_ms[kind] = (median(r[1] for r in rounds), max(r[1] for r in rounds))
        res.fanout_cpu_ms[kind] = (median(r[2] for r in rounds), max(r[2] for r in rounds))
    finally:
        for c in conns:
            c.close()
    if trace:
        await asyncio.sleep(SETTLE_S)  # the server sees the streams end
        res.notes.append(gc_line(f"{kind}: streams closed", await gc_report(port, census=True)))
        res.notes.append(
            gc_line(
                f"{kind}: streams closed, after a full collection",
                await gc_report(port, census=True, collect=True),
            )
        )


async def one_fanout(
    server: LoggedServer, kind: str, sid: str, conns: Sequence[RawHTTP], left: list[bytes]
) -> tuple[float, float, float, float]:
    """One ``touch``: (p50 ms, last ms, server CPU ms, t0) until every stream has read the change."""
    got: list[float] = []

    async def wait(i: int, conn: RawHTTP) -> None:
        left[i] = await _read_until(conn, MARK, left[i])
        got.append(time.perf_counter())

    waiters = [asyncio.ensure_future(wait(i, c)) for i, c in enumerate(conns)]
    await asyncio.sleep(0)
    caller = await RawHTTP.open(server.port)
    try:
        t0 = time.perf_counter()
        if kind == "get":
            h = {**LEGACY, "Mcp-Session-Id": sid, "MCP-Protocol-Version": LEGACY_VERSION}
            caller.send("POST", h, call_body(7, "touch", {}))
        else:
            caller.send("POST", modern_headers("tools/call", "touch"), call_body(7, "touch", {}, modern=True))
        ticks0 = proc_cpu_ticks(server.pid)
        status, headers = await caller.head()
        body = await caller.body(headers)
        if status != 200 or b'"ok"' not in body:
            raise BenchFailure(f"touch: HTTP {status} {body[:200]!r}")
        async with asyncio.timeout(STREAM_TIMEOUT_S):
            await asyncio.gather(*waiters)
        cpu = (proc_cpu_ticks(server.pid) - ticks0) * 1e3 / CLK_TCK
    finally:
        caller.close()
        for w in waiters:
            w.cancel()
    delays = sorted((t - t0) * 1e3 for t in got)
    return delays[len(delays) // 2], delays[-1], cpu, t0


def run_row(wrk: str, row: str, part: str, cfg: Settings, source: McpkitSource, rng: random.Random) -> Result:
    res = Result()
    kinds = STREAM_KINDS if row in MCPKIT_ROWS else ("get",)
    if part == "conc" and row == "mcpkit+redis":
        return res
    if part in ("sessions", "streams") and row == "floor-py":
        return res  # no sessions
    with tempfile.TemporaryFile() as log:
        server = make_server(row, source, cfg.redis_url, log)
        try:
            server.start()
            if part == "conc":
                part_conc(wrk, server, cfg, rng, res)
            elif part == "sessions":
                arun(part_sessions(server, cfg, rng, res))
            else:
                for kind in kinds:
                    arun(part_streams(server, row, kind, cfg, res))
        except (BenchFailure, httpx.HTTPError, OSError, asyncio.IncompleteReadError, TimeoutError) as exc:
            res.failures.append(f"{part}: {type(exc).__name__}: {exc}{server.log_tail()}")
        finally:
            server.stop()
    return res


def arun(coro: Any) -> Any:
    """Run ``coro`` on uvloop when installed (the load generator's own loop turn is then smaller)."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)


def bench(wrk: str, cfg: Settings, source: McpkitSource) -> dict[tuple[str, str], Result]:
    rng = random.Random(cfg.seed)
    order = [(row, part) for part in cfg.parts for row in cfg.rows]
    rng.shuffle(order)
    out: dict[tuple[str, str], Result] = {}
    for row, part in order:
        t0 = time.perf_counter()
        res = out[(row, part)] = run_row(wrk, row, part, cfg, source, rng)
        status = "FAILED " + res.failures[0].splitlines()[0] if res.failures else "ok"
        print(f"  {row:13} {part:9} {time.perf_counter() - t0:5.1f} s {status}", file=sys.stderr, flush=True)
    return out


# ----------------------------------------------------------------------------------------------- plots

IMG_DIR = ROOT / "docs" / "img" / "bench"


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_lines(
    name: str,
    title: str,
    xlabel: str,
    ylabel: str,
    series: dict[str, dict[Any, float]],
    *,
    logx: bool = False,
    logy: bool = False,
) -> None:
    """One PNG under docs/img/bench/: a line per series (x -> y)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    for label, points in series.items():
        xs = sorted(points)
        ax.plot(xs, [points[x] for x in xs], marker="o", label=label)
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    IMG_DIR.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(IMG_DIR / name)
    plt.close(fig)


def plot_bars(name: str, title: str, ylabel: str, values: dict[str, float]) -> None:
    """One PNG under docs/img/bench/: a bar per label."""
    if not values:
        return
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    ax.bar(list(values), list(values.values()), color="#4878a8")
    for i, v in enumerate(values.values()):
        ax.annotate(f"{v:,.1f}", (i, v), ha="center", va="bottom", fontsize=8)
    ax.set(title=title, ylabel=ylabel)
    ax.tick_params(axis="x", labelrotation=20)
    IMG_DIR.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(IMG_DIR / name)
    plt.close(fig)


# ---------------------------------------------------------------------------------------------- report


def summary(results: dict[tuple[str, str], Result]) -> dict[str, Any]:
    def get(row: str, part: str) -> Result:
        return results.get((row, part)) or Result()

    return {
        "session_kib": {r: get(r, "sessions").session_kib for r in ALL_ROWS},
        "stream_kib": {r: get(r, "streams").stream_kib for r in ALL_ROWS},
        "fanout_ms": {r: get(r, "streams").fanout_ms for r in MCPKIT_ROWS},
        "conc": {r: {c: w.rps for c, w in get(r, "conc").conc.items()} for r in ALL_ROWS},
    }


def render_report(
    results: dict[tuple[str, str], Result], cfg: Settings, machine: list[str], level: str = "#"
) -> str:
    h2 = level + "#"
    lines = report_head("Connections and sessions (issue 18 item 3)", machine, level)
    add = lines.append
    rows = [r for r in cfg.rows if any((r, p) in results for p in cfg.parts)]

    if "conc" in cfg.parts:
        add(f"{h2} Concurrent connections: `tools/call` in one legacy session (JSON), wrk -t1 -cC")
        add("")
        add(
            "| server | " + " | ".join(f"c={c} req/s | c={c} p50 / p99 / p99.9 ms" for c in cfg.levels) + " |"
        )
        add("|---|" + "---|---|" * len(cfg.levels))
        for r in rows:
            res = results.get((r, "conc"))
            if res is None or r == "mcpkit+redis":
                continue
            cells = []
            for c in cfg.levels:
                w = res.conc.get(c)
                if w is None:
                    cells += ["n/a", "n/a"]
                else:
                    p999 = w.raw.get("p999_us", 0) / 1e3
                    cells += [fmt(w.rps), f"{w.p50_ms:.1f} / {w.p99_ms:.1f} / {p999:.1f}"]
            add(f"| {r} | " + " | ".join(cells) + " |")
        add("")
        mk = results.get(("mcpkit", "conc"))
        if mk is not None:
            others = [r for r in rows if r not in MCPKIT_ROWS and (r, "conc") in results]
            per_level = []
            for c in cfg.levels:
                mine = mk.conc[c].rps if c in mk.conc else None
                cells = []
                for o in others:
                    theirs = results[(o, "conc")].conc.get(c)
                    cells.append(f"{o} {ratio(mine, theirs.rps if theirs else None)}")
                per_level.append(f"c={c}: " + ", ".join(cells))
            add("mcpkit req/s ÷ each peer's, per level: " + "; ".join(per_level) + ".")
            add("")
        add("Plot: `docs/img/bench/connections_rps.png` (shown in docs/performance.md)")
        add("Plot: `docs/img/bench/connections_p99.png` (shown in docs/performance.md)")
        add("")

    if "sessions" in cfg.parts:
        add(f"{h2} {cfg.sessions:,} idle legacy sessions: memory per session")
        add("")
        add("| server | KiB per session | vs mcpkit |")
        add("|---|---|---|")
        mk_kib = (results.get(("mcpkit", "sessions")) or Result()).session_kib
        for r in rows:
            res = results.get((r, "sessions"))
            if res is None or r == "floor-py":
                continue
            add(f"| {r} | {fmt(res.session_kib, 1)} | {ratio(res.session_kib, mk_kib)} |")
        off = (results.get(("official", "sessions")) or Result()).session_kib
        if mk_kib is not None and off:
            ok = mk_kib <= off / 4
            add("")
            add(
                f"Target (at most a quarter of the official SDK's): mcpkit ÷ official = {mk_kib / off:.2f}: "
                f"**{'met' if ok else 'NOT met'}**."
            )
        add("")
        add("Plot: `docs/img/bench/sessions_kib.png` (shown in docs/performance.md)")
        add("")

    if "streams" in cfg.parts:
        add(f"{h2} {cfg.streams:,} open streams: memory per stream and change fan-out")
        add("")
        add(
            f"| server | GET stream KiB | listen stream KiB | fan-out GET ms: median / max of {cfg.fanouts} "
            f"| fan-out listen ms: median / max of {cfg.fanouts} |"
        )
        add("|---|---|---|---|---|")
        for r in rows:
            res = results.get((r, "streams"))
            if res is None or r == "floor-py":
                continue

            def fo(kind: str, res: Result = res) -> str:
                v = res.fanout_ms.get(kind)
                cpu = res.fanout_cpu_ms.get(kind) or (None, None)
                if v is None:
                    return "n/a"
                slow = sum(r[1] >= 100.0 for r in res.fanout_rounds.get(kind, ()))
                return (
                    f"{v[0]:.1f} / {v[1]:.1f}, {slow} of {cfg.fanouts} ≥ 100 "
                    f"(server CPU {fmt(cpu[0])} / {fmt(cpu[1])})"
                )

            listen = fmt(res.stream_kib.get("listen"), 1) if r in MCPKIT_ROWS else "not measured"
            add(f"| {r} | {fmt(res.stream_kib.get('get'), 1)} | {listen} | {fo('get')} | {fo('listen')} |")
        add("")
        add(
            f"Fan-out: {cfg.fanouts} changes one after the other on the same open streams, each timed from "
            "the `touch` call to the moment the last stream had it; median and max over them, and how many "
            "took 100 ms or more. Target: one "
            "change reaches 1,000 listeners in under 100 ms on one worker, judged on the max of `mcpkit` "
            "(listen): a full collection of the garbage collector lands in some fan-outs and not others, "
            "and a listener waits through it when it does. `server CPU`: the server process's CPU ms "
            "(utime+stime, 10 ms ticks) over each fan-out, median / max: the server's share; the rest is "
            "the one Python process reading every stream. Peers: their `subscriptions/listen` was not "
            "measured and they have no server-wide change broadcast (n/a)."
        )
        add("")
        add("Plot: `docs/img/bench/streams_fanout.png` (shown in docs/performance.md)")
        add("")

    failures = [(f"{r} {p}", f) for (r, p), res in results.items() for f in res.failures]
    notes = [(f"{r} {p}", n) for (r, p), res in results.items() for n in res.notes]
    lines += failures_and_notes(h2, failures, notes)
    return "\n".join(lines)


def write_plots(results: dict[tuple[str, str], Result], cfg: Settings) -> None:
    conc = {
        r: {c: w for c, w in results[(r, "conc")].conc.items()}
        for r in cfg.rows
        if (r, "conc") in results and results[(r, "conc")].conc
    }
    if conc:
        plot_lines(
            "connections_rps.png",
            "tools/call throughput by concurrent connections",
            "connections",
            "req/s",
            {r: {c: w.rps for c, w in v.items()} for r, v in conc.items()},
            logx=True,
        )
        plot_lines(
            "connections_p99.png",
            "tools/call p99 latency by concurrent connections",
            "connections",
            "p99 ms",
            {r: {c: w.p99_ms for c, w in v.items()} for r, v in conc.items()},
            logx=True,
            logy=True,
        )
    sess = {r: results[(r, "sessions")].session_kib for r in cfg.rows if (r, "sessions") in results}
    plot_bars(
        "sessions_kib.png",
        f"memory per idle legacy session ({cfg.sessions:,})",
        "KiB per session",
        {k: v for k, v in sess.items() if v is not None},
    )
    fan = {}
    for r in MCPKIT_ROWS:
        res = results.get((r, "streams"))
        if res:
            for kind, (_, worst) in res.fanout_ms.items():
                fan[f"{r} {kind}"] = worst
    plot_bars(
        "streams_fanout.png",
        f"one change to {cfg.streams:,} streams: time to the last, worst of {cfg.fanouts} (ms)",
        "ms",
        fan,
    )


def failed(results: dict[tuple[str, str], Result]) -> bool:
    return any(res.failures for (r, _), res in results.items() if r in MCPKIT_ROWS or r == "official")


# ------------------------------------------------------------------------------------------------ main


def make_settings(smoke: bool, seed: int | None, rows: Sequence[str] | None = None, **over: Any) -> Settings:
    cfg = Settings(
        rows=tuple(r for r in (rows or ALL_ROWS) if not smoke or r in SMOKE_ROWS),
        parts=PARTS,
        levels=(1, 10) if smoke else (1, 10, 100, 1000),
        duration_s=1 if smoke else 2,
        sessions=50 if smoke else 10_000,
        streams=20 if smoke else 1_000,
        fanouts=2 if smoke else FANOUTS,
        seed=seed if seed is not None else random.randrange(2**32),
        smoke=smoke,
    )
    for k, v in over.items():
        if v is not None:
            setattr(cfg, k, tuple(v) if isinstance(v, list) else v)
    return cfg


def run(
    wrk: str, cfg: Settings, source: McpkitSource, redis_url: str | None
) -> tuple[dict[tuple[str, str], Result], list[str]]:
    with redis_for_bench(redis_url) as (url, version, notes):
        cfg.redis_url = url
        results = bench(wrk, cfg, source)
    info = [
        f"Redis {version} at `{url}` (`mcpkit+redis` rows)",
        f"load generator (conc): {wrk_version(wrk)} `wrk -t1 -cC` with `bench/wrk_mcp_call.lua`; sessions "
        "and streams: one asyncio process (uvloop) with hand-written HTTP/1.1",
        f"levels c={list(cfg.levels)}, -d{cfg.duration_s}s; {cfg.sessions:,} sessions; "
        f"{cfg.streams:,} streams ({cfg.fanouts} fan-outs per kind); one repetition, shuffle seed {cfg.seed}",
        *notes,
    ]
    return results, info


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--smoke", action="store_true", help="mcpkit/official, toy sizes, nothing written")
    p.add_argument("--peers", nargs="+", choices=ALL_ROWS, default=None)
    p.add_argument("--parts", nargs="+", choices=PARTS, default=None)
    p.add_argument("--levels", type=int, nargs="+", default=None)
    p.add_argument("--sessions", type=int, default=None)
    p.add_argument("--streams", type=int, default=None)
    p.add_argument("--duration", type=int, default=None)
    p.add_argument("--redis-url", default=None)
    p.add_argument("--fanouts", type=int, default=None, help="change notifications timed per stream kind")
    p.add_argument(
        "--gc-trace",
        action="store_true",
        help="mcpkit servers record their GC collections (MCPKIT_BENCH_GC=1): the notes say which ran in "
        "each fan-out, and what the collector tracks before, during and after the streams",
    )
    add_run_options(p, install=True)
    a = p.parse_args(argv)
    cfg = make_settings(
        a.smoke,
        a.seed,
        a.peers,
        parts=a.parts,
        levels=a.levels,
        sessions=a.sessions,
        streams=a.streams,
        duration_s=a.duration,
        fanouts=a.fanouts,
        gc_trace=a.gc_trace or None,
    )
    if cfg.gc_trace:
        os.environ["MCPKIT_BENCH_GC"] = "1"  # the servers' environment is this one's
    wrk, wrk_notes = ensure_wrk()
    wanted = [r for r in cfg.rows if r not in MCPKIT_ROWS]
    setup = setup_peers([w for w in wanted if w in HTTP_SCRIPTS], install=not a.no_install)
    cfg.rows = tuple(r for r in cfg.rows if r in MCPKIT_ROWS or r in setup.available)
    source = mcpkit_source(snapshot=not a.live_source)
    load_before = load_average()
    try:
        results, info = run(wrk, cfg, source, a.redis_url)
    finally:
        source.cleanup()
    machine = [
        *machine_lines(),
        *info,
        *setup.lines(),
        *wrk_notes,
        f"load average before: {load_before}; after: {load_average()}",
    ]
    report = render_report(results, cfg, machine)
    if not a.smoke and not a.no_write:
        write_plots(results, cfg)
    return finish(
        report, failed(results), write=not a.smoke and not a.no_write, section=SECTION, label="connections"
    )


CORE = CORE_PEERS
if __name__ == "__main__":
    sys.exit(main())
