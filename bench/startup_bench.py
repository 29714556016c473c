"""Start-up benchmark: import time, cold start (spawn -> ``initialize`` answer) and idle RSS of stdio servers.

Method (docs: /work/shared/docs/performance-anchors.md, section 4):

* Import time: every case runs in a fresh process, ``python -c`` (or ``node --input-type=module -e``) with a
  ``perf_counter`` (``performance.now()``) around the import statement ("in-process ms"), plus the whole
  process's wall time as seen by this script ("process wall ms") and the number of modules loaded
  (``len(sys.modules)``). Baselines: ``python -c pass`` and ``node -e 0``.
* Cold start: spawn the stdio server (``bench/servers/*_echo.*``, see ``bench/peers.py``) with blocking pipes,
  write ``initialize`` at once and time until its answer arrives. Then ``notifications/initialized`` +
  ``tools/list``, 0.2 s of idling, and the server's VmRSS (``/proc/PID/status``): the idle RSS.
* Every repetition runs every case once (imports and cold starts mixed), in shuffled order; figures are
  medians. One extra ``python -X importtime`` run shows which modules dominate mcpkit's import.

Usage::

    python bench/startup_bench.py            # all peers, 7 reps; writes its section of bench/RESULTS.md
    python bench/startup_bench.py --smoke    # mcpkit/official/floor-py, 1 rep, no writing
"""

from __future__ import annotations

import argparse
import json
import os
import random
import select
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import orjson
from common import (
    SERVERS_DIR,
    BenchFailure,
    McpkitSource,
    add_run_options,
    finish,
    fmt,
    load_average,
    machine_lines,
    mcpkit_source,
    median,
    proc_status_kib,
    ratio,
    report_head,
)
from peers import ALL_PEERS, CORE_PEERS, interpreter, peer_env, setup_peers, stdio_argv

SECTION = "startup_bench"
PROTOCOL_VERSION = "2025-11-25"
IDLE_SETTLE_S = 0.2
COLD_TIMEOUT_S = 30.0
IMPORT_TIMEOUT_S = 60.0


# ---------------------------------------------------------------------------------------------- imports


@dataclass(frozen=True)
class ImportCase:
    name: str
    peer: str  # which peer's interpreter and environment
    statement: str  # shown in the report
    code: str  # what the fresh process runs; it prints one JSON object


def _py(statement: str) -> str:
    return (
        "import time as _t\n_t0 = _t.perf_counter()\n"
        f"{statement}\n"
        "_ms = (_t.perf_counter() - _t0) * 1e3\n"
        "import sys as _s, json as _j\n"
        "print(_j.dumps({'ms': _ms, 'modules': len(_s.modules)}))"
    )


def _node(statement: str) -> str:
    helper = (SERVERS_DIR / "_node_sdk.mjs").as_uri()
    return (
        "const t0 = performance.now();\n"
        f"{statement.replace('HELPER', helper)}\n"
        "const ms = performance.now() - t0;\n"
        "process.stdout.write(JSON.stringify({ms, modules: null}) + '\\n');"
    )


TS_IMPORT = (
    "const { sdk, zod } = await import('HELPER');\n"
    "await Promise.all([sdk('server/mcp.js'), sdk('server/stdio.js'), zod()]);"
)

IMPORT_CASES = (
    ImportCase("python -c pass (baseline)", "floor-py", "(nothing)", _py("pass")),
    ImportCase("mcpkit: `from mcpkit import MCPServer`", "mcpkit", "from mcpkit import MCPServer",
               _py("from mcpkit import MCPServer")),
    ImportCase("mcpkit: `from mcpkit import Client`", "mcpkit", "from mcpkit import Client",
               _py("from mcpkit import Client")),
    ImportCase("official: `from mcp.server import MCPServer`", "official", "from mcp.server import MCPServer",
               _py("from mcp.server import MCPServer")),
    ImportCase("official: `from mcp import Client`", "official", "from mcp import Client",
               _py("from mcp import Client")),
    ImportCase("fastmcp: `from fastmcp import FastMCP`", "fastmcp", "from fastmcp import FastMCP",
               _py("from fastmcp import FastMCP")),
    ImportCase("node -e 0 (baseline)", "floor-node", "(nothing)", _node("")),
    ImportCase("ts-sdk: `McpServer` + `StdioServerTransport` + zod", "ts-sdk", "import() of the three",
               _node(TS_IMPORT)),
)  # fmt: skip


def import_argv(case: ImportCase) -> list[str]:
    exe = interpreter(case.peer)
    if case.peer in ("ts-sdk", "floor-node"):
        return [exe, "--input-type=module", "-e", case.code]
    return [exe, "-c", case.code]


@dataclass
class ImportRun:
    ms: float
    wall_ms: float
    modules: int | None


def run_import(case: ImportCase, source: McpkitSource) -> ImportRun:
    argv = import_argv(case)
    t0 = time.perf_counter()
    try:
        done = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=IMPORT_TIMEOUT_S,
            env={**os.environ, **peer_env(case.peer, source)},
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise BenchFailure(f"import did not finish within {IMPORT_TIMEOUT_S:g} s") from exc
    wall = (time.perf_counter() - t0) * 1e3
    if done.returncode != 0:
        raise BenchFailure(f"exit {done.returncode}: {done.stderr.strip()[-400:]}")
    try:
        out = json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError) as exc:
        raise BenchFailure(f"no JSON from the import process: {done.stdout[-200:]!r}") from exc
    return ImportRun(float(out["ms"]), wall, out.get("modules"))


def importtime_top(source: McpkitSource, statement: str, limit: int = 12) -> list[tuple[str, int, int]]:
    """One ``python -X importtime`` run: the top-level packages by cumulative import time (µs)."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", statement],
        capture_output=True,
        text=True,
        timeout=IMPORT_TIMEOUT_S,
        env={**os.environ, **source.env},
        check=False,
    )
    # Lines: "import time: self [us] | cumulative | imported package"; a top-level entry has no indent.
    per_pkg: dict[str, list[int]] = {}
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, cum_us, name = line[len("import time:") :].split("|", 2)
        indent = len(name) - len(name.lstrip())
        mod = name.strip()
        top = mod.split(".")[0]
        entry = per_pkg.setdefault(top, [0, 0])
        entry[0] += int(self_us)
        if indent <= 1:  # imported directly by the statement (or by the interpreter)
            entry[1] += int(cum_us)
    ranked = sorted(per_pkg.items(), key=lambda kv: kv[1][0], reverse=True)
    return [(name, self_us, cum) for name, (self_us, cum) in ranked[:limit]]


# ------------------------------------------------------------------------------------------ cold start


def _read_line(proc: subprocess.Popen[bytes], buf: bytearray, deadline: float) -> bytes:
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    while True:
        nl = buf.find(b"\n")
        if nl >= 0:
            line = bytes(buf[: nl + 1])
            del buf[: nl + 1]
            return line
        left = deadline - time.perf_counter()
        if left <= 0:
            raise BenchFailure("timed out waiting for the server")
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            chunk = os.read(fd, 65536)
            if not chunk:
                raise BenchFailure("server closed stdout (EOF)")
            buf += chunk


def _response(proc: subprocess.Popen[bytes], buf: bytearray, deadline: float, want_id: int) -> dict:  # type: ignore[type-arg]
    while True:
        msg = orjson.loads(_read_line(proc, buf, deadline))
        if isinstance(msg, dict) and msg.get("id") == want_id and "method" not in msg:
            if "result" not in msg:
                raise BenchFailure(f"error response: {msg}")
            return msg


@dataclass
class ColdRun:
    cold_ms: float
    idle_rss_kib: int


def run_cold(peer: str, source: McpkitSource, stderr_path: str) -> ColdRun:
    init = orjson.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "mcpkit-startup-bench", "version": "0"},
            },
        }
    )
    with open(stderr_path, "wb") as errf:
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            stdio_argv(peer),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errf,
            env={**os.environ, **peer_env(peer, source)},
        )
        try:
            assert proc.stdin is not None
            proc.stdin.write(init + b"\n")
            proc.stdin.flush()
            buf = bytearray()
            deadline = t0 + COLD_TIMEOUT_S
            _response(proc, buf, deadline, 1)
            cold_ms = (time.perf_counter() - t0) * 1e3
            proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
            proc.stdin.write(b'{"jsonrpc":"2.0","id":2,"method":"tools/list"}\n')
            proc.stdin.flush()
            _response(proc, buf, deadline, 2)
            time.sleep(IDLE_SETTLE_S)
            rss = proc_status_kib(proc.pid)["VmRSS"]
        finally:
            if proc.stdin is not None:
                proc.stdin.close()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
    return ColdRun(cold_ms, rss)


# ------------------------------------------------------------------------------------------------ runs


@dataclass
class StartupStats:
    imports: dict[str, list[ImportRun]] = field(default_factory=dict)
    cold: dict[str, list[ColdRun]] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    importtime: list[tuple[str, int, int]] = field(default_factory=list)


def bench(peers: Sequence[str], source: McpkitSource, reps: int, seed: int) -> StartupStats:
    stats = StartupStats()
    cases = [c for c in IMPORT_CASES if c.peer in peers]
    units: list[tuple[str, object]] = [("import", c) for c in cases] + [("cold", p) for p in peers]
    rng = random.Random(seed)
    stderr_path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"startup_bench_{os.getpid()}.err")
    try:
        for rep in range(1, reps + 1):
            order = list(units)
            rng.shuffle(order)
            print(f"rep {rep}/{reps}: {len(order)} fresh processes", file=sys.stderr, flush=True)
            for kind, what in order:
                try:
                    if kind == "import":
                        assert isinstance(what, ImportCase)
                        stats.imports.setdefault(what.name, []).append(run_import(what, source))
                    else:
                        assert isinstance(what, str)
                        stats.cold.setdefault(what, []).append(run_cold(what, source, stderr_path))
                except (BenchFailure, OSError) as exc:
                    label = what.name if isinstance(what, ImportCase) else what
                    stats.failures.append(f"rep {rep}: {kind} {label}: {exc}")
                    print(f"  {kind} {label}: FAILED: {exc}", file=sys.stderr, flush=True)
        if "mcpkit" in peers:
            stats.importtime = importtime_top(source, "from mcpkit import MCPServer")
    finally:
        if os.path.exists(stderr_path):
            os.unlink(stderr_path)
    return stats


def summary(stats: StartupStats) -> dict[str, dict[str, float | None]]:
    """Median cold start (ms) and idle RSS (MiB) per peer."""
    return {
        peer: {
            "cold": median(r.cold_ms for r in runs),
            "rss": median(r.idle_rss_kib / 1024 for r in runs),
        }
        for peer, runs in stats.cold.items()
    }


# -------------------------------------------------------------------------------------------- report


def render_report(
    stats: StartupStats, peers: Sequence[str], reps: int, machine: list[str], title_level: str = "#"
) -> str:
    h2 = title_level + "#"
    lines = report_head("Start-up: import time, cold start, idle RSS", machine, title_level)
    add = lines.append
    add(
        f"Fresh processes, imports and cold starts interleaved in shuffled order, {reps} repetitions, "
        "medians. Cold start = spawn -> `initialize` answer over blocking pipes; idle RSS = VmRSS after "
        "`initialize` + `tools/list` + 0.2 s."
    )
    add("")
    add(f"{h2} Cold start and idle RSS (stdio servers)")
    add("")
    cold = summary(stats)
    add(
        "| server | runs | cold start ms | min-max ms | idle RSS MiB | mcpkit cold ÷ this "
        "| mcpkit RSS ÷ this |"
    )
    add("|---|---|---|---|---|---|---|")
    mk = cold.get("mcpkit", {})
    for peer in [p for p in peers if p in cold]:
        runs = stats.cold[peer]
        c = cold[peer]
        times = [r.cold_ms for r in runs]
        add(
            f"| **{peer}** | {len(runs)}/{reps} | {fmt(c['cold'], 1)} "
            f"| {fmt(min(times), 1)}-{fmt(max(times), 1)} "
            f"| {fmt(c['rss'], 1)} | {ratio(mk.get('cold'), c['cold'])} | {ratio(mk.get('rss'), c['rss'])} |"
        )
    add("")
    add(f"{h2} Import time (fresh process each)")
    add("")
    add("| import | runs | in-process ms | process wall ms | modules loaded |")
    add("|---|---|---|---|---|")
    for case in IMPORT_CASES:
        runs = stats.imports.get(case.name)
        if not runs:
            continue
        mods = median(r.modules for r in runs if r.modules is not None)
        add(
            f"| {case.name} | {len(runs)}/{reps} | {fmt(median(r.ms for r in runs), 1)} "
            f"| {fmt(median(r.wall_ms for r in runs), 1)} | {fmt(mods)} |"
        )
    add("")
    if stats.importtime:
        add(f"{h2} Where mcpkit's import time goes")
        add("")
        add("`python -X importtime -c 'from mcpkit import MCPServer'`.")
        add("")
        add(
            "One run; top-level packages ranked by the self time of all their modules (µs). On a loaded "
            "machine single-run figures are noisy; read them as proportions."
        )
        add("")
        add("| package | self µs (all its modules) |")
        add("|---|---|")
        for name, self_us, _cum in stats.importtime:
            add(f"| `{name}` | {self_us:,} |")
        add("")
    if stats.failures:
        add(f"{h2} Failures")
        add("")
        for failure in stats.failures:
            add(f"- {failure.splitlines()[0]}")
        add("")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------- main


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--smoke", action="store_true", help="mcpkit/official/floor-py, 1 rep, no writing")
    parser.add_argument("--reps", type=int, default=None, help="repetitions (default 7; smoke 1)")
    parser.add_argument("--peers", nargs="+", action="extend", choices=ALL_PEERS, help="peers (default: all)")
    add_run_options(parser, install=True)
    args = parser.parse_args(argv)
    reps = args.reps or (1 if args.smoke else 7)
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    wanted = list(dict.fromkeys(args.peers or (CORE_PEERS if args.smoke else ALL_PEERS)))
    setup = setup_peers(wanted, install=not args.no_install)
    source = mcpkit_source(snapshot=not args.live_source)
    load_before = load_average()
    try:
        stats = bench(setup.available, source, reps, seed)
    finally:
        source.cleanup()
    machine = [
        *machine_lines(),
        f"mcpkit imported from: {source.note}",
        *setup.lines(),
        f"reps={reps}, shuffle seed {seed}",
        f"load average (1/5/15 min) before: {load_before}; after: {load_average()}",
    ]
    report = render_report(stats, setup.available, reps, machine)
    return finish(
        report,
        bool(stats.failures),
        write=not args.smoke and not args.no_write,
        section=SECTION,
        label="start-up",
    )


if __name__ == "__main__":
    sys.exit(main())
