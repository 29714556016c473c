"""Runs one attack against a real :class:`mcpkit.Client` in its own process and reports,
as one JSON line, what it cost: the time the call took, how it failed, the growth of
this process's memory (peak resident set, from ``/proc/self/status``), and whether
the client still answered afterwards.

Usage: ``driver.py stdio ATTACK TIMEOUT`` or ``driver.py http URL ATTACK TIMEOUT [sse]``.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

from mcpkit import Client
from mcpkit.protocol.errors import MCPError

SERVER = Path(__file__).with_name("server.py")
PROTOCOL = "2025-06-18"


def memory_kib() -> dict[str, int]:
    """VmRSS (now) and VmHWM (the peak so far), in KiB."""
    out: dict[str, int] = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0])
    return out


async def run(target: Any, attack: str, timeout: float, transport: str = "auto") -> dict[str, Any]:
    seen = {"logs": 0, "progress": 0, "last_progress": 0.0}

    async def slow_log(params: Any) -> None:
        seen["logs"] += 1
        await asyncio.sleep(0.001)  # a handler slower than the flood

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen["progress"] += 1
        seen["last_progress"] = value
        await asyncio.sleep(0.001)

    report: dict[str, Any] = {"attack": attack}
    options: dict[str, Any] = {"transport": transport} if transport != "auto" else {}
    client = Client(target, protocol=PROTOCOL, timeout=timeout, log_handler=slow_log, **options)
    async with client:
        await client.list_tools()
        before = memory_kib()
        start = time.monotonic()
        try:
            result = await client.call_tool(attack, {}, progress=progress)
            report["result"] = " ".join(getattr(c, "text", "") for c in result.content)
        except MCPError as exc:
            report["error"] = {"code": exc.code, "message": exc.message}
        report["seconds"] = round(time.monotonic() - start, 3)
        after = memory_kib()
        report["rss_before_kib"] = before["VmRSS"]
        report["peak_growth_kib"] = max(0, after["VmHWM"] - before["VmRSS"])
        report["dropped_notifications"] = client.dropped_notifications
        report["seen"] = seen
        start = time.monotonic()
        try:
            after_ok = await client.call_tool("ok", {}, timeout=timeout)
            report["ok_after"] = " ".join(getattr(c, "text", "") for c in after_ok.content)
        except MCPError as exc:
            report["ok_after_error"] = {"code": exc.code, "message": exc.message}
        except ConnectionError as exc:  # the connection was ended (unrecoverable stream)
            report["ok_after_error"] = {"closed": type(exc).__name__, "message": str(exc)}
        report["ok_after_seconds"] = round(time.monotonic() - start, 3)
        closing = time.monotonic()
    report["close_seconds"] = round(time.monotonic() - closing, 3)
    return report


def main() -> None:
    args = sys.argv[1:]
    if args[0] == "stdio":
        target: Any = [sys.executable, str(SERVER), "stdio"]
        attack, timeout = args[1], float(args[2])
    else:
        target, attack, timeout = args[1], args[2], float(args[3])
    transport = args[4] if len(args) > 4 else "auto"
    print(json.dumps(asyncio.run(run(target, attack, timeout, transport))), flush=True)


if __name__ == "__main__":
    main()
