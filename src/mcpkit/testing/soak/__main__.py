"""``python -m mcpkit.testing.soak [--duration 10m] [--out build/soak]``: run a soak, print its report."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from ...transports.loop import run as run_loop
from .run import SoakConfig, run_soak


def seconds(text: str) -> float:
    """``90``, ``90s``, ``10m``, ``2h`` -> seconds."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", text)
    if match is None:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (e.g. 45s, 10m, 2h)")
    return float(match[1]) * {"": 1, "s": 1, "m": 60, "h": 3600}[match[2]]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mcpkit.testing.soak", description=__doc__)
    parser.add_argument("--duration", type=seconds, default=600.0, help="time under faults (default 10m)")
    parser.add_argument(
        "--warmup", type=seconds, default=10.0, help="load without faults first (default 10s)"
    )
    parser.add_argument("--fault-gap", type=seconds, default=12.0, help="seconds between faults (default 12)")
    parser.add_argument("--out", type=Path, default=Path("build/soak"), help="where soak.md and logs go")
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args(argv)
    config = SoakConfig(args.duration, args.warmup, args.fault_gap, args.out, seed=args.seed)
    report = run_loop(run_soak(config))
    print(report.markdown)
    print(f"written to {args.out / 'soak.md'}", file=sys.stderr)
    return 0 if report.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
