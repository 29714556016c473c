"""``stdio_client`` and ``StdioServerParameters``, shaped like the official SDK's.

Code written for the official Python SDK moves over by changing its imports::

    from mcpkit import ClientSession, StdioServerParameters
    from mcpkit.client.stdio import stdio_client
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from ..transports.stdio import ProcessChannel, open_process_channel

__all__ = ["StdioServerParameters", "stdio_client"]


@dataclass
class StdioServerParameters:
    """How to spawn a stdio server (no shell is involved)."""

    command: str
    args: list[str] = field(default_factory=list)
    env: dict[str, str] | None = None
    cwd: str | Path | None = None
    encoding: str = "utf-8"
    encoding_error_handler: str = "strict"


@asynccontextmanager
async def stdio_client(
    server: StdioServerParameters, errlog: TextIO | None = None
) -> AsyncIterator[tuple[ProcessChannel, ProcessChannel]]:
    """Spawn the server; yields ``(read, write)`` for :class:`ClientSession`.

    Both are the same channel: mcpkit has no stream pair to wire up.
    """
    stderr: Any = errlog if errlog is not None else sys.stderr
    try:
        stderr.fileno()
    except (AttributeError, OSError, ValueError):
        sink = stderr

        def stderr(data: bytes) -> None:
            sink.write(data.decode(server.encoding, server.encoding_error_handler))

    channel = await open_process_channel(
        server.command,
        server.args,
        env=server.env,
        cwd=os.fspath(server.cwd) if server.cwd else None,
        stderr=stderr,
    )
    try:
        yield channel, channel
    finally:
        await channel.close()
