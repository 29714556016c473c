"""mcpkit Streamable HTTP server for the connections benchmark: ``echo(text) -> text`` and ``touch()``.

Usage: ``python mcpkit_conn.py PORT`` (or ``python -m mcpkit run bench/servers/mcpkit_conn.py --transport http
--port PORT [--workers 1 --redis URL]``). Legacy sessions answer JSON (``json_response=True``).
``touch`` tells every client that the tool list changed (``notify_list_changed``): one call is one change
notification on every open GET stream (legacy) and every ``subscriptions/listen`` stream (modern), which is
what the fan-out measurement times.
"""

import gc
import os
import sys
import time
from collections import Counter
from typing import Any

from mcpkit import MCPServer

server = MCPServer("conn")


@server.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool()
def touch() -> str:
    """Announce a tool-list change to every listener."""
    server.notify_list_changed("tools")
    return "ok"


# Opt-in diagnostic (MCPKIT_BENCH_GC=1, set by ``connections_bench.py --gc-trace``): every collection
# of the garbage collector is recorded (CLOCK_MONOTONIC start, generation, duration, objects collected),
# and a ``gc_report`` tool hands the records over, so the bench can say which collections ran inside a
# fan-out. time.perf_counter is CLOCK_MONOTONIC on Linux: the same clock as the bench process's.
if os.environ.get("MCPKIT_BENCH_GC"):
    _collections: list[dict[str, Any]] = []
    _started: list[float] = []

    def _on_gc(phase: str, info: dict[str, Any]) -> None:
        now = time.perf_counter()
        if phase == "start":
            _started[:] = [now]
        elif _started:
            start = _started.pop()
            _collections.append(
                {
                    "start": start,
                    "ms": (now - start) * 1e3,
                    "gen": info["generation"],
                    "collected": info["collected"],
                }
            )

    gc.callbacks.append(_on_gc)

    @server.tool()
    def gc_report(census: bool = False, collect: bool = False) -> dict[str, Any]:
        """The collections since the last report; with ``census``, what the collector tracks (after a
        full collection first, with ``collect``)."""
        out: dict[str, Any] = {"collections": list(_collections), "count": gc.get_count()}
        _collections.clear()
        if collect:
            out["collected"] = gc.collect()
        if census:
            objects = gc.get_objects()
            out["objects"] = len(objects)
            out["by_gen"] = [len(gc.get_objects(g)) for g in range(3)]
            names = Counter(f"{type(o).__module__}.{type(o).__qualname__}" for o in objects)
            out["top"] = names.most_common(60)
            del objects
        return out


if __name__ == "__main__":
    server.run("http", host="127.0.0.1", port=int(sys.argv[1]), json_response=True)
