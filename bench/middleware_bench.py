"""Benchmark of what middleware and tracing cost: mcpkit's stdio echo server in five configurations.

The configurations (``servers/mcpkit_mw.py``, chosen by ``MCPKIT_BENCH_VARIANT``): ``plain`` (no
middleware: an empty chain), ``hooked`` (one pass-through ``on_call_tool`` hook), ``ratelimit+accesslog``
(``RateLimit`` with a limit never reached and ``AccessLog`` writing to /dev/null), ``tracing-off``
(opentelemetry-api importable, no provider) and ``tracing-on`` (the SDK, a batch span processor and an
exporter that drops spans). Every configuration runs the stdio phase of ``stdio_bench.py`` (raw
client, sequential and pipelined ``tools/call``), interleaved in shuffled order within every
repetition; the report gives medians and each configuration's ratio to ``plain`` measured in the same run.

Targets (issue 12): an empty chain and tracing-off within 3% of the plain server's throughput,
``RateLimit`` + ``AccessLog`` within 15%.

Usage::

    python bench/middleware_bench.py            # N=2000, 5 reps; writes its section of RESULTS.md
    python bench/middleware_bench.py --smoke    # N=100, 1 rep, nothing written
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
from collections.abc import Sequence

from common import (
    RESULTS_PATH,
    McpkitSource,
    add_run_options,
    fmt,
    load_average,
    machine_lines,
    mcpkit_source,
    report_head,
    write_section,
)
from peers import SERVERS_DIR, interpreter, peer_env
from stdio_bench import ServerSpec, ServerStats, Settings, bench, pipe_rate, seq_rate

SECTION = "middleware_bench"
VARIANTS = ("plain", "hooked", "ratelimit+accesslog", "tracing-off", "tracing-on")
#: (variant, the least ratio of its throughput to plain's, what the target says)
TARGETS = (
    ("tracing-off", 0.97, "tracing off within 3% of the plain server"),
    ("ratelimit+accesslog", 0.85, "RateLimit + AccessLog within 15% of the plain server"),
)


def specs(source: McpkitSource) -> list[ServerSpec]:
    argv = [interpreter("mcpkit"), str(SERVERS_DIR / "mcpkit_mw.py")]
    return [
        ServerSpec(f"mcpkit-{variant}", argv, {**peer_env("mcpkit", source), "MCPKIT_BENCH_VARIANT": variant})
        for variant in VARIANTS
    ]


def cpu_us(stats: ServerStats) -> float | None:
    return statistics.median(r.cpu_seq_us for r in stats.runs) if stats.runs else None


def ratios(stats: dict[str, ServerStats], n: int) -> dict[str, dict[str, float | None]]:
    """Per variant: seq and pipelined rates, CPU per call, and their ratios to plain."""
    base = stats["mcpkit-plain"]
    base_seq, base_pipe, base_cpu = seq_rate(base, n), pipe_rate(base, n), cpu_us(base)
    out: dict[str, dict[str, float | None]] = {}
    for variant in VARIANTS:
        s = stats[f"mcpkit-{variant}"]
        seq, pipe, cpu = seq_rate(s, n), pipe_rate(s, n), cpu_us(s)
        out[variant] = {
            "seq": seq,
            "pipe": pipe,
            "cpu": cpu,
            "seq_ratio": seq / base_seq if seq and base_seq else None,
            "pipe_ratio": pipe / base_pipe if pipe and base_pipe else None,
            "cpu_ratio": cpu / base_cpu if cpu and base_cpu else None,
        }
    return out


def render(stats: dict[str, ServerStats], n: int, reps: int, machine: list[str]) -> str:
    table = ratios(stats, n)
    lines = report_head("Middleware and tracing: cost against the plain server", machine, "##")
    lines += [
        "",
        f"stdio echo server, raw client, N={n} calls per phase, {reps} repetitions, medians; ratios are to "
        "`plain` in the same run (throughput: higher is better; CPU: lower is better).",
        "",
        "| configuration | seq calls/s | ratio | pipelined req/s | ratio | CPU µs/call (seq) | ratio |",
        "|---|---|---|---|---|---|---|",
    ]
    for variant in VARIANTS:
        row = table[variant]
        lines.append(
            f"| {variant} | {fmt(row['seq'])} | {fmt(row['seq_ratio'], 3)} | {fmt(row['pipe'])} | "
            f"{fmt(row['pipe_ratio'], 3)} | {fmt(row['cpu'], 1)} | {fmt(row['cpu_ratio'], 3)} |"
        )
    lines += ["", "| target | pipelined ratio | seq ratio | met |", "|---|---|---|---|"]
    lines.append("| an empty chain is the plain server | 1.000 | 1.000 | yes (the same server) |")
    for variant, least, label in TARGETS:
        row = table[variant]
        pipe, seq = row["pipe_ratio"], row["seq_ratio"]
        met = pipe is not None and seq is not None and min(pipe, seq) >= least
        lines.append(f"| {label} | {fmt(pipe, 3)} | {fmt(seq, 3)} | {'yes' if met else '**NO**'} |")
    failures = [f"{name}: {f}" for name, s in stats.items() for f in s.failures]
    if failures:
        lines += ["", "Failures:", *(f"- {f}" for f in failures)]
    return "\n".join(lines) + "\n"


def parse_args(argv: Sequence[str] | None) -> tuple[argparse.Namespace, Settings]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--smoke", action="store_true", help="N=100, 1 rep, nothing written")
    parser.add_argument("--n", type=int, default=None, help="calls per timed phase (default 2000)")
    parser.add_argument("--reps", type=int, default=None, help="repetitions (default 5)")
    add_run_options(parser)
    args = parser.parse_args(argv)
    n = args.n if args.n is not None else (100 if args.smoke else 2000)
    reps = args.reps if args.reps is not None else (1 if args.smoke else 5)
    if n < 1 or reps < 1:
        parser.error("--n and --reps must be >= 1")
    cfg = Settings(
        n=n,
        reps=reps,
        timeout_s=10.0 + 0.01 * n,
        handshake_timeout_s=15.0 if args.smoke else 30.0,
        client_read_size=64 * 1024,
        seed=args.seed if args.seed is not None else random.randrange(2**32),
        warmup=50 if args.smoke else 5000,
        warmup_s=0.0 if args.smoke else 2.0,
    )
    return args, cfg


def main(argv: Sequence[str] | None = None) -> int:
    args, cfg = parse_args(argv)
    source = mcpkit_source(snapshot=not args.live_source)
    load_before = load_average()
    try:
        stats = asyncio.run(bench(specs(source), cfg))
    finally:
        source.cleanup()
    machine = [
        *machine_lines(),
        f"mcpkit imported from: {source.note}",
        f"shuffle seed {cfg.seed}; load average (1/5/15 min) before: {load_before}; after: {load_average()}",
    ]
    report = render(stats, cfg.n, cfg.reps, machine)
    print(report)
    if any(s.failures for s in stats.values()):
        print("\nFAILED: a configuration did not answer correctly; RESULTS.md not written.", file=sys.stderr)
        return 1
    if not args.smoke and not args.no_write:
        write_section(SECTION, report)
        print(f"\nwrote the middleware section of {RESULTS_PATH}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
