"""A client process for tests/transports/test_loop.py: runs mcpkit's Client on the loop
``mcpkit.transports.loop.run`` picks, against a stdio command or an HTTP URL, and prints
what it saw as one JSON line.

    python loop_client.py PROTOCOL URL
    python loop_client.py PROTOCOL -- COMMAND ARGS...
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from mcpkit import Client
from mcpkit.transports.loop import run, running_loop


def text(result: Any) -> str:
    return str(result.content[0].text)


async def main(protocol: str, target: str | list[str]) -> dict[str, Any]:
    progress: list[float] = []
    logs: list[Any] = []
    async with Client(
        target, protocol=protocol, log_handler=lambda m: logs.append(m.data), log_level="debug"
    ) as client:  # type: ignore[arg-type]
        server_loop = text(await client.call_tool("loop", {}))
        echoes = [
            text(r)
            for r in await asyncio.gather(*(client.call_tool("echo", {"text": f"t{i}"}) for i in range(50)))
        ]
        for i in range(20):
            assert text(await client.call_tool("echo", {"text": str(i)})) == str(i)
        stepped = text(
            await client.call_tool("steps", {"n": 3}, progress=lambda p, total, message: progress.append(p))
        )
        return {
            "client_loop": running_loop(),
            "server_loop": server_loop,
            "modern": client.is_modern,
            "echoes_ok": echoes == [f"t{i}" for i in range(50)],
            "steps": stepped,
            "progress": progress,
            "logs": logs,
        }


if __name__ == "__main__":
    protocol, rest = sys.argv[1], sys.argv[2:]
    target: str | list[str] = rest[1:] if rest[0] == "--" else rest[0]
    print(json.dumps(run(main(protocol, target))), flush=True)
