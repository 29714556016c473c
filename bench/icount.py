"""Instructions per ``tools/call`` (valgrind/callgrind), for A/B comparisons on a loaded machine.

Wall time on a shared 2-core machine moves with whatever else runs; the number of instructions a process
executes per call does not. This runs one side under ``valgrind --tool=callgrind`` twice, with ``--calls``
small and large, and reports ``(Ir(large) - Ir(small)) / (large - small)``: start-up, imports and the
handshake cancel out. It also counts the ``read``/``write`` system calls per call with ``strace -c``
(kernel work that callgrind does not see).

Sides:

* ``server``: mcpkit's stdio echo server (``bench/servers/mcpkit_echo.py``, its tool pinned inline: see
  ``serve``) under valgrind, driven by a
  plain blocking client (``--mode seq``: one call at a time; ``--mode pipe``: batches of ``--batch``
  requests written by a thread while the answers are read).
* ``client``: a process running mcpkit's ``Client`` (``protocol="legacy"``) against the same server
  (native); the client process is measured (sequential ``call_tool`` or ``asyncio.gather`` batches).
  ``--proxied``: the client calls ``MCPServer.proxy(<that server>)`` in its own process instead
  (the proxy's work is counted with the client's, as in ``bench/proxy_bench.py``'s proxied way).

Usage::

    python bench/icount.py server --mode seq
    python bench/icount.py server --mode pipe --calls 4000
    python bench/icount.py client --mode seq
    python bench/icount.py client --mode seq --proxied --calls 1200
    python bench/icount.py server --mode seq --strace     # system calls per call instead

``--source DIR`` measures the mcpkit package under ``DIR`` (e.g. a ``git worktree`` of an older commit's
``src``) instead of this checkout's ``src``.

``server --server floor-py|official`` counts the hand-written floor or the official SDK's server instead,
for ratios in the same unit.

``--loop uvloop|asyncio`` sets ``MCPKIT_LOOP`` for the measured process (default: the environment's, else
``auto``: uvloop when installed), so the same call is counted on either event loop::

    python bench/icount.py server --mode seq --loop asyncio
    python bench/icount.py server --mode seq --loop uvloop
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SERVER = Path(__file__).resolve()
#: ``server --server NAME``: the other Python stdio servers of the benchmark, for the same count.
PEER_SERVERS = {
    "floor-py": ROOT / "bench" / "servers" / "floor_echo.py",
    "official": ROOT / "bench" / "servers" / "official_echo.py",
}
TEXT = "hello"


def call_line(i: int) -> bytes:
    return (
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": i,
                "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": TEXT}},
            },
            separators=(",", ":"),
        ).encode()
        + b"\n"
    )


def drive_server(argv: list[str], env: dict[str, str], mode: str, calls: int, batch: int) -> None:
    """Run ``argv`` (a stdio server) and make ``calls`` tools/call round trips."""
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    assert proc.stdin is not None and proc.stdout is not None
    w, r = proc.stdin, proc.stdout

    def send(data: bytes) -> None:
        w.write(data)
        w.flush()

    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "i", "version": "0"},
        },
    }
    send(json.dumps(init).encode() + b"\n")
    json.loads(r.readline())
    send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    if mode == "seq":
        for i in range(1, calls + 1):
            send(call_line(i))
            msg = json.loads(r.readline())
            assert msg["id"] == i and msg["result"]["content"][0]["text"] == TEXT, msg
    else:
        next_id = 1
        while next_id <= calls:
            ids = range(next_id, min(calls, next_id + batch - 1) + 1)
            data = b"".join(call_line(i) for i in ids)
            writer = threading.Thread(target=send, args=(data,))
            writer.start()
            seen = set()
            for _ in ids:
                msg = json.loads(r.readline())
                assert msg["result"]["content"][0]["text"] == TEXT, msg
                seen.add(msg["id"])
            writer.join()
            assert seen == set(ids)
            next_id = ids[-1] + 1
    w.close()
    proc.wait(timeout=600)


def run_child(main: Any) -> None:
    """Run the client child on mcpkit's loop choice (``MCPKIT_LOOP``); asyncio's for a source without it."""
    try:
        from mcpkit.transports.loop import run
    except ImportError:
        asyncio.run(main)
        return
    run(main)


async def client_child(mode: str, calls: int, batch: int, proxied: bool = False) -> None:
    from mcpkit import Client, MCPServer

    backend = [sys.executable, str(SERVER), "--serve"]
    target: Any = MCPServer.proxy(Client(backend, protocol="legacy")) if proxied else backend
    async with Client(target, protocol="legacy") as client:
        await client.list_tools()
        if mode == "seq":
            for _ in range(calls):
                result = await client.call_tool("echo", {"text": TEXT})
                assert result.content[0].text == TEXT  # type: ignore[union-attr]
        else:
            done = 0
            while done < calls:
                n = min(batch, calls - done)
                results = await asyncio.gather(*(client.call_tool("echo", {"text": TEXT}) for _ in range(n)))
                assert all(r.content[0].text == TEXT for r in results)  # type: ignore[union-attr]
                done += n


def measure(args: argparse.Namespace, calls: int, out: Path) -> int:
    """Run one measurement of ``calls`` calls; returns the instruction count (or syscalls with --strace)."""
    env = {**os.environ, "PYTHONPATH": str(args.source)}
    if args.loop:
        env["MCPKIT_LOOP"] = args.loop
    if args.strace:
        tool = ["strace", "-f", "-c", "-e", "trace=read,write,writev,epoll_wait", "-o", str(out)]
    else:
        tool = ["valgrind", "-q", "--tool=callgrind", f"--callgrind-out-file={out}"]
    if args.side == "server":
        server = [str(SERVER), "--serve"] if args.server == "mcpkit" else [str(PEER_SERVERS[args.server])]
        drive_server([*tool, sys.executable, *server], env, args.mode, calls, args.batch)
    else:
        subprocess.run(
            [*tool, sys.executable, __file__, "--child", args.mode, str(calls), str(args.batch)]
            + (["--proxied"] if args.proxied else []),
            env=env,
            check=True,
            stderr=subprocess.DEVNULL if not args.strace else None,
        )
    text = out.read_text()
    if args.strace:
        total = 0
        for line in text.splitlines():
            parts = line.split()
            if len(parts) >= 5 and parts[-1] in ("read", "write", "writev"):
                total += int(parts[3])
        print(f"  {calls} calls: {text.strip()}", file=sys.stderr)
        return total
    files = [out, *out.parent.glob(out.name + ".*")]
    total = 0
    for f in files:
        m = re.search(r"^(?:summary|totals):\s*(\d+)", f.read_text(), flags=re.M)
        if m:
            total = max(total, int(m.group(1)))
    return total


def serve() -> None:
    """``bench/servers/mcpkit_echo.py`` with the tool pinned inline.

    A sync tool starts in a worker thread and moves inline once its calls prove
    fast (``SyncRunner``), which under valgrind's ~50x slowdown happens late or
    never: pinning gives the steady state of a native run, deterministically.
    """
    sys.path.insert(0, str(ROOT / "bench" / "servers"))
    from mcpkit_mw import VARIANT, middleware_for  # MCPKIT_BENCH_VARIANT: middleware_bench's configurations

    from mcpkit import MCPServer

    server = MCPServer("echo", middleware=middleware_for(VARIANT))

    @server.tool(threaded=False)
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    server.run()


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--serve":
        serve()
        return 0
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        mode, calls, batch = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
        run_child(client_child(mode, calls, batch, proxied="--proxied" in sys.argv[5:]))
        return 0
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("side", choices=("server", "client"))
    p.add_argument("--mode", choices=("seq", "pipe"), default="seq")
    p.add_argument("--calls", type=int, default=2000, help="calls in the large run (the small run: 1/4)")
    p.add_argument("--batch", type=int, default=1000, help="requests per pipelined batch")
    p.add_argument("--source", type=Path, default=ROOT / "src", help="directory holding the mcpkit package")
    p.add_argument("--strace", action="store_true", help="count read/write system calls instead")
    p.add_argument("--proxied", action="store_true", help="client side: call through an in-process proxy")
    p.add_argument(
        "--server", choices=("mcpkit", *PEER_SERVERS), default="mcpkit", help="server side: which server"
    )
    p.add_argument(
        "--loop", choices=("auto", "uvloop", "asyncio"), default=None, help="MCPKIT_LOOP, measured side"
    )
    args = p.parse_args()
    small = max(1, args.calls // 4)
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        a = measure(args, small, Path(tmp) / "small.out")
        b = measure(args, args.calls, Path(tmp) / "large.out")
        per = (b - a) / (args.calls - small)
    unit = "read/write system calls" if args.strace else "instructions"
    loop = args.loop or os.environ.get("MCPKIT_LOOP") or "auto"
    what = ("proxied client" if args.proxied else "client") if args.side == "client" else args.server
    print(
        f"{what} {args.mode} (MCPKIT_LOOP={loop}): {per:,.1f} {unit} per call "
        f"({small} calls: {a:,}; {args.calls} calls: {b:,}; {time.perf_counter() - t0:.0f} s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
