"""The progress tools of ts_progress_server.py served over HTTP (Streamable HTTP and legacy HTTP+SSE).

Binds 127.0.0.1 on a free port, prints ``PORT <n>`` once it listens, and serves
until stopped: with mcpkit's runner, or, given ``wrapped``, as an ASGI app
behind a middleware that wraps ``send`` (as Starlette's do) under plain uvicorn.
Run by the TypeScript-client test over ``/sse``.
"""

from __future__ import annotations

import asyncio
import socket
import sys
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import uvicorn

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ts_progress_server import server

from mcpkit.transports.http import HTTPSettings, StreamableHTTPApp
from mcpkit.transports.http.runner import serve_http


def wrapped_app() -> Any:
    app = StreamableHTTPApp(server, HTTPSettings())

    async def middleware(scope: Any, receive: Any, send: Any) -> None:
        async def wrapped_send(message: MutableMapping[str, Any]) -> None:
            await send(message)

        await app(scope, receive, wrapped_send)

    return middleware


def main() -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    if sys.argv[1:] == ["wrapped"]:
        config = uvicorn.Config(wrapped_app(), lifespan="on", log_level="warning", access_log=False)
        asyncio.run(uvicorn.Server(config).serve(sockets=[sock]))
    else:
        asyncio.run(serve_http(server, host="127.0.0.1", sockets=[sock]))


if __name__ == "__main__":
    main()
