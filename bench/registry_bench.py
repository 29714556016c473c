"""Cost curve of registry size: servers with 10 .. 10,000 tools (and as many resources and templates).

Method:

* Peers: the servers of ``bench/servers/curve_*`` (see ``payload_bench.py``) started with N filler tools
  ``tool_{i}``, N resources ``res://{i}`` and N templates ``tmpl{i}://{id}/item``, over stdio, driven by the
  raw client of ``payload_bench.py`` (one request at a time, every answer checked).
* Per (peer, N), in one process: start-up (spawn -> ``initialize`` answer) and RSS after it;
  ``tools/list`` following ``nextCursor`` to the end (mcpkit pages 100 at a time; the other SDKs answer in
  one page), every tool counted; ``tools/call`` of the last filler tool (dispatch); ``resources/read`` of
  a URI that only the last-registered template matches (template matching).
* Repetitions run the peers and sizes in shuffled order; figures are medians.

Usage::

    python bench/registry_bench.py            # all peers, writes its RESULTS.md section and plot
    python bench/registry_bench.py --smoke    # mcpkit/official at N=10 and 100
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from common import (
    ROOT,
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
from payload_bench import IMG_DIR, PEERS, SMOKE_PEERS, StdioClient, curve_argv
from peers import peer_env, setup_peers

SECTION = "registry_bench"
SIZES = (10, 100, 1000, 10_000)
SMOKE_SIZES = (10, 100)
LIST_REPS, CALLS, READS = 5, 200, 100
SMOKE_LIST_REPS, SMOKE_CALLS, SMOKE_READS = 1, 20, 10
#: A peer whose start-up at one size took longer than this is not run at the larger sizes.
SLOW_START_S = 60.0


@dataclass
class Cell:
    startup_ms: list[float] = field(default_factory=list)
    rss_mib: list[float] = field(default_factory=list)
    list_ms: list[float] = field(default_factory=list)
    pages: int = 0
    call_us: list[float] = field(default_factory=list)
    read_us: list[float] = field(default_factory=list)


@dataclass
class Stats:
    cells: dict[tuple[str, int], Cell] = field(default_factory=dict)
    failures: list[tuple[str, str]] = field(default_factory=list)
    skipped: dict[tuple[str, int], str] = field(default_factory=dict)


def _med(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def run_one(peer: str, n: int, source: McpkitSource, smoke: bool, cell: Cell) -> None:
    with tempfile.TemporaryFile() as log:
        client = StdioClient(curve_argv(peer, n, "stdio"), peer_env(peer, source), log)
        try:
            cell.startup_ms.append(client.handshake())
            cell.rss_mib.append(proc_status_kib(client.pid)["VmRSS"] / 1024)
            for _ in range(SMOKE_LIST_REPS if smoke else LIST_REPS):
                t0 = time.perf_counter()
                names: list[str] = []
                cursor: Any = None
                pages = 0
                while True:
                    params = {"cursor": cursor} if cursor else {}
                    msg = client.call({"jsonrpc": "2.0", "method": "tools/list", "params": params})
                    result = msg.get("result") or {}
                    names += [tool["name"] for tool in result.get("tools", [])]
                    pages += 1
                    cursor = result.get("nextCursor")
                    if not cursor:
                        break
                cell.list_ms.append((time.perf_counter() - t0) * 1e3)
                cell.pages = pages
                if len(names) != n + 1 or f"tool_{n - 1}" not in names:
                    raise BenchFailure(f"tools/list: {len(names)} tools, expected {n + 1}")
            call = {
                "jsonrpc": "2.0",
                "method": "tools/call",
                "params": {"name": f"tool_{n - 1}", "arguments": {"value": "v"}},
            }
            read = {"jsonrpc": "2.0", "method": "resources/read", "params": {"uri": f"tmpl{n - 1}://42/item"}}
            for msg, count, out, check in (
                (call, SMOKE_CALLS if smoke else CALLS, cell.call_us, _check_call),
                (read, SMOKE_READS if smoke else READS, cell.read_us, _check_read),
            ):
                check(client.call(msg))  # warm-up
                for _ in range(count):
                    t0 = time.perf_counter()
                    answer = client.call(msg)
                    out.append((time.perf_counter() - t0) * 1e6)
                    check(answer)
        finally:
            client.close()


def _check_call(msg: dict[str, Any]) -> None:
    content = (msg.get("result") or {}).get("content") or [{}]
    if content[0].get("text") != "v":
        raise BenchFailure(f"tools/call: {str(msg)[:300]}")


def _check_read(msg: dict[str, Any]) -> None:
    contents = (msg.get("result") or {}).get("contents") or [{}]
    if contents[0].get("text") != "42":
        raise BenchFailure(f"resources/read: {str(msg)[:300]}")


def bench(
    peers: Sequence[str],
    sizes: Sequence[int],
    reps: int,
    seed: int,
    source: McpkitSource,
    smoke: bool,
    skip: dict[tuple[str, int], str] | None = None,
) -> Stats:
    """``skip``: (peer, N) -> why it is not run (said in the report)."""
    st = Stats()
    for (peer, n), why in (skip or {}).items():
        st.skipped[(peer, n)] = why
    rng = random.Random(seed)
    for _ in range(reps):
        units = [(p, n) for p in peers for n in sizes]
        rng.shuffle(units)
        for peer, n in units:
            if (peer, n) in st.skipped:
                continue
            print(f"  registry {peer} N={n} (load {load_average()})", file=sys.stderr, flush=True)
            cell = st.cells.setdefault((peer, n), Cell())
            try:
                run_one(peer, n, source, smoke, cell)
            except BenchFailure as exc:
                if not cell.startup_ms and "no initialize answer" in str(exc):
                    # too slow to start here: skipped at this size and above (said in the report)
                    for bigger in sizes:
                        if bigger >= n:
                            st.skipped[(peer, bigger)] = f"no initialize answer within the timeout at N={n:,}"
                    continue
                st.failures.append((f"{peer} N={n}", f"{type(exc).__name__}: {exc}"))
            except (OSError, subprocess.SubprocessError, ValueError) as exc:
                st.failures.append((f"{peer} N={n}", f"{type(exc).__name__}: {exc}"))
            if cell.startup_ms and cell.startup_ms[-1] > SLOW_START_S * 1e3:
                for bigger in sizes:
                    if bigger > n:
                        st.skipped[(peer, bigger)] = (
                            f"start-up at N={n} took {cell.startup_ms[-1] / 1e3:.0f} s"
                        )
    return st


def summary(st: Stats, sizes: Sequence[int]) -> dict[str, Any]:
    """mcpkit's dispatch at the largest size ÷ at the smallest (target: ≤ 1.10)."""
    lo = st.cells.get(("mcpkit", sizes[0]))
    hi = st.cells.get(("mcpkit", sizes[-1]))
    a = _med(lo.call_us) if lo else None
    b = _med(hi.call_us) if hi else None
    return {"dispatch_small": a, "dispatch_large": b, "sizes": (sizes[0], sizes[-1])}


def render_report(
    st: Stats,
    peers: Sequence[str],
    sizes: Sequence[int],
    reps: int,
    machine: Sequence[str],
    title_level: str = "#",
    plot: bool = True,
) -> str:
    h2 = "#" * (len(title_level) + 1)
    lines = report_head("Cost curve: registry size", machine, title_level)
    lines += [
        "N tools + N resources + N templates per server (stdio). Medians; `vs mcpkit` is the peer's median ÷ "
        "mcpkit's in the same interleaved run (> 1: mcpkit faster or smaller). `tools/list` is the time for "
        "all pages (mcpkit: 100 per page; the others: one page). Dispatch: `tools/call` of the last tool; "
        "template read: `resources/read` that only the last template matches.",
        "",
        "| N | peer | start-up ms | RSS MiB | tools/list ms (pages) | dispatch µs | template read µs "
        "| vs mcpkit (list / dispatch / read / start) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for n in sizes:
        base = st.cells.get(("mcpkit", n))
        for peer in peers:
            if (peer, n) in st.skipped and not (st.cells.get((peer, n)) or Cell()).startup_ms:
                lines.append(f"| {n:,} | {peer} | skipped: {st.skipped[(peer, n)]} | | | | | |")
                continue
            c = st.cells.get((peer, n))
            if c is None or not c.call_us:
                continue
            vs = "-"
            if base is not None and base.call_us and peer != "mcpkit":
                parts = []
                for mine, theirs in (
                    (base.list_ms, c.list_ms),
                    (base.call_us, c.call_us),
                    (base.read_us, c.read_us),
                    (base.startup_ms, c.startup_ms),
                ):
                    a, b = _med(mine), _med(theirs)
                    parts.append(f"{b / a:.2f}x" if a and b else "n/a")
                vs = " / ".join(parts)
            lines.append(
                f"| {n:,} | {peer} | {fmt(_med(c.startup_ms))} | {fmt(_med(c.rss_mib), 1)} | "
                f"{fmt(_med(c.list_ms), 1)} ({c.pages}) | {fmt(_med(c.call_us))} | "
                f"{fmt(_med(c.read_us))} | {vs} |"
            )
    s = summary(st, sizes)
    if s["dispatch_small"] and s["dispatch_large"]:
        r = s["dispatch_large"] / s["dispatch_small"]
        lines += [
            "",
            f"mcpkit dispatch at N={sizes[-1]:,} ÷ at N={sizes[0]:,}: **{r:.2f}** (target ≤ 1.10: "
            f"{'met' if r <= 1.10 else 'NOT met'}).",
        ]
    lines.append("")
    if st.failures:
        lines += [f"{h2} Failures", ""]
        lines += [f"- **{what} FAILED** {text.splitlines()[0][:300]}" for what, text in st.failures]
        lines.append("")
    if plot:
        path = draw(st, peers, sizes)
        if path is not None:
            lines += [f"Plot: `{path.relative_to(ROOT)}` (shown in docs/performance.md)", ""]
    return "\n".join(lines)


def draw(st: Stats, peers: Sequence[str], sizes: Sequence[int]) -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    IMG_DIR.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(1, 5, figsize=(20, 3.6))
    for ax, (attr, label) in zip(
        axes,
        (
            ("list_ms", "tools/list, all pages (ms)"),
            ("call_us", "tools/call dispatch (µs)"),
            ("read_us", "template resources/read (µs)"),
            ("startup_ms", "start-up (ms)"),
            ("rss_mib", "RSS after start (MiB)"),
        ),
        strict=True,
    ):
        for peer in peers:
            xs, ys = [], []
            for n in sizes:
                c = st.cells.get((peer, n))
                v = _med(getattr(c, attr)) if c else None
                if v is not None:
                    xs.append(n)
                    ys.append(v)
            if xs:
                ax.plot(xs, ys, marker="o", label=peer)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("tools (and resources, templates)")
        ax.set_title(label, fontsize=10)
        ax.grid(True, alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    path = IMG_DIR / "registry.png"
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--smoke", action="store_true")
    p.add_argument("--reps", type=int, default=None)
    p.add_argument("--peers", nargs="+", choices=PEERS, default=None)
    p.add_argument(
        "--max-n",
        nargs="+",
        default=[],
        metavar="PEER=N",
        help="run PEER only up to N tools (e.g. fastmcp=1000: a start-up too slow for the time available)",
    )
    add_run_options(p, install=True)
    a = p.parse_args(argv)
    seed = a.seed if a.seed is not None else random.randrange(2**32)
    setup = setup_peers(a.peers or (SMOKE_PEERS if a.smoke else PEERS), install=not a.no_install)
    sizes = SMOKE_SIZES if a.smoke else SIZES
    reps = a.reps or 1
    source = mcpkit_source(snapshot=not a.live_source)
    try:
        limits = {peer: int(n) for peer, _, n in (item.partition("=") for item in a.max_n)}
        skip = {
            (peer, n): f"not run above N={limit:,} (`--max-n`: too slow to start here)"
            for peer, limit in limits.items()
            for n in sizes
            if n > limit
        }
        st = bench(setup.available, sizes, reps, seed, source, a.smoke, skip)
    finally:
        source.cleanup()
    machine = [*machine_lines(), f"reps={reps}, seed {seed}", *setup.lines()]
    report = render_report(st, setup.available, sizes, reps, machine, plot=not a.smoke)
    return finish(
        report, bool(st.failures), write=not (a.no_write or a.smoke), section=SECTION, label="registry"
    )


if __name__ == "__main__":
    sys.exit(main())
