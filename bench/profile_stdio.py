"""Profile a stdio echo server under the benchmark's raw client with py-spy, and summarise where time goes.

Runs ``py-spy record`` around the server (``bench/servers/<peer>_echo.py``), drives it with the raw client of
``stdio_bench.py`` (sequential or pipelined ``tools/call``), then prints the functions with the most samples:
self time (the frame at the top of the stack) and inclusive time (anywhere on the stack), and the split
between idle (waiting in ``select``/``epoll``) and busy samples.

Usage::

    python bench/profile_stdio.py                       # mcpkit, 20,000 sequential calls
    python bench/profile_stdio.py --mode pipe --calls 100000
    python bench/profile_stdio.py --peer official --calls 3000 --keep /tmp/official.txt

Needs ``py-spy`` (in the dev venv) and permission to ptrace the child (root here).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import shutil
import signal
import sys
import tempfile
import time
from asyncio.subprocess import DEVNULL
from pathlib import Path

import stdio_bench
from common import mcpkit_source
from peers import peer_env, stdio_argv

# Leaf frames that mean "waiting": the event loop in epoll/select, an idle thread-pool worker.
IDLE_FUNCS = (
    "select (selectors.py",
    "poll (selectors.py",
    "_worker (concurrent/futures/thread.py:81)",
    "wait (threading.py",
)


def py_spy() -> str:
    found = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not os.path.exists(found):
        raise SystemExit("py-spy not found (pip install py-spy)")
    return found


async def drive(spec: stdio_bench.ServerSpec, mode: str, calls: int, spy_argv: list[str]) -> float:
    """Start the server, attach py-spy to it, run the calls, stop py-spy (SIGINT makes it write the file)."""
    with tempfile.TemporaryFile() as err:
        client = stdio_bench.RawClient(spec, err, stdio_bench.DEFAULT_CLIENT_READ_KIB * 1024)
        spy: asyncio.subprocess.Process | None = None
        try:
            async with asyncio.timeout(30):
                await client.spawn()
                await client.initialize()
                client.notify_initialized()
                await client.list_tools()
                await client.sequential(200)
                spy = await asyncio.create_subprocess_exec(
                    *spy_argv, "--pid", str(client.pid), stdout=DEVNULL, stderr=DEVNULL
                )
                await asyncio.sleep(1.0)  # let py-spy attach
            t0 = time.perf_counter()
            async with asyncio.timeout(600):
                if mode == "seq":
                    await client.sequential(calls)
                else:
                    for _ in range(0, calls, 2000):
                        await client.pipelined(2000)
            return time.perf_counter() - t0
        finally:
            if spy is not None and spy.returncode is None:
                spy.send_signal(signal.SIGINT)
                try:
                    async with asyncio.timeout(30):
                        await spy.wait()
                except TimeoutError:
                    spy.kill()
                    await spy.wait()
            await client.close(10.0)


def summarise(raw: Path, top: int) -> None:
    self_counts: collections.Counter[str] = collections.Counter()
    incl_counts: collections.Counter[str] = collections.Counter()
    total = idle = 0
    for line in raw.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack:
            continue
        count = int(count_text)
        frames = stack.split(";")
        total += count
        leaf = frames[-1]
        if any(f in leaf for f in IDLE_FUNCS):
            idle += count
        self_counts[leaf] += count
        if any(f in leaf for f in IDLE_FUNCS):
            continue
        for frame in set(frames):
            incl_counts[frame] += count
    if not total:
        print("no samples")
        return
    busy = total - idle
    print(f"samples (all threads): {total:,}; idle (waiting): {idle / total:.0%}; busy: {busy / total:.0%}")
    print(f"\ntop {top} by self time (% of busy samples):")
    for frame, count in self_counts.most_common(top + 3):
        if any(f in frame for f in IDLE_FUNCS):
            continue
        print(f"  {count / busy:6.1%}  {frame}")
    print(f"\ntop {top} by inclusive time (% of busy samples):")
    shown = 0
    for frame, count in incl_counts.most_common():
        if count >= busy * 0.98:  # the frames every busy stack goes through (main, run_forever, ...)
            continue
        print(f"  {count / busy:6.1%}  {frame}")
        shown += 1
        if shown >= top:
            break


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--peer", default="mcpkit", choices=("mcpkit", "official", "floor-py"))
    parser.add_argument("--mode", default="seq", choices=("seq", "pipe"))
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--rate", type=int, default=1000, help="py-spy samples per second")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--keep", type=Path, default=None, help="also keep the raw (collapsed) profile here")
    parser.add_argument("--native", action="store_true", help="py-spy --native (C frames too)")
    parser.add_argument(
        "--gil", action="store_true", help="py-spy --gil: only samples holding the GIL (Python CPU time)"
    )
    args = parser.parse_args()
    source = mcpkit_source()
    out = Path(tempfile.mkdtemp(prefix="profile_stdio_")) / "profile.txt"
    try:
        # --nonblocking: never pause the server. Pausing stretches what the server measures itself: mcpkit's
        # SyncRunner then sees its first tool calls as slow and pins the sync tool to the thread pool.
        argv = [py_spy(), "record", "--nonblocking", "--format", "raw", "-r", str(args.rate), "-o", str(out)]
        if args.native:
            argv.append("--native")
        if args.gil:
            argv.append("--gil")
        spec = stdio_bench.ServerSpec(args.peer, stdio_argv(args.peer), peer_env(args.peer, source))
        seconds = asyncio.run(drive(spec, args.mode, args.calls, argv))
        rate = args.calls / seconds
        print(f"{args.peer} {args.mode}: {args.calls:,} calls in {seconds:.2f} s = {rate:,.0f}/s")
        print("(under py-spy sampling, so slower than the benchmark)\n")
        for _ in range(100):
            if out.exists() and out.stat().st_size:
                break
            time.sleep(0.1)
        summarise(out, args.top)
        if args.keep:
            shutil.copy(out, args.keep)
    finally:
        shutil.rmtree(out.parent, ignore_errors=True)
        source.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
