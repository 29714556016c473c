"""Watching a stdio server process: the end of its output, and its last words on stderr."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

from ..protocol.errors import MCPError
from ..protocol.framing import Oversized
from ..transports.stdio import ProcessChannel
from ._safe_text import safe_text

__all__ = ["StderrTail", "WatchedChannel"]


class WatchedChannel:
    """A process channel that reports, synchronously, when the server's output ends.

    Synchronously, so the backend is marked as restarting before the session
    fails its pending requests: a caller that sees its call fail and tries
    again must find the server restarting, not the dead connection.
    """

    def __init__(self, inner: ProcessChannel) -> None:
        self.inner = inner
        self.ended = False
        self._on_eof: Callable[[], None] | None = None

    def watch(self, on_eof: Callable[[], None]) -> None:
        self._on_eof = on_eof
        if self.ended:
            on_eof()

    def _ending(self) -> None:
        if not self.ended:
            self.ended = True
            if self._on_eof is not None:
                self._on_eof()

    async def read(self) -> Any:
        batch = await self.inner.read()
        if batch is None:
            self._ending()
        return batch

    def set_receiver(self, receiver: Callable[[list[bytes | Oversized] | None], None]) -> None:
        """Push mode (what the engine uses): the end of output is seen before the engine's."""

        def receive(batch: list[bytes | Oversized] | None) -> None:
            if batch is None:
                self._ending()
            receiver(batch)

        self.inner.set_receiver(receive)

    def hold_input(self) -> None:
        self.inner.hold_input()

    def release_input(self) -> None:
        self.inner.release_input()

    def write(self, data: bytes, related: int | str | None = None) -> None:
        self.inner.write(data, related)

    def respond(self, request_id: int | str | None, data: bytes, error: MCPError | None = None) -> None:
        self.inner.respond(request_id, data, error)

    async def drain(self) -> None:
        await self.inner.drain()

    async def close(self) -> None:
        await self.inner.close()


class StderrTail:
    """Passes a server's stderr on (to ours, or to ``target``) and keeps its end.

    The last line a server printed before it died ("ModuleNotFoundError: …")
    is usually the reason it failed, so failures are reported with it.
    """

    LIMIT = 4096

    def __init__(self, target: Any = None) -> None:
        self._target = target
        self._data = b""

    def sink(self, data: bytes) -> None:
        self._data = (self._data + data)[-self.LIMIT :]
        target = self._target
        if callable(target):
            target(data)
        elif target is None:
            # A server's stderr reaches the user's terminal: its escape sequences must not act there.
            sys.stderr.write(safe_text(data.decode("utf-8", "replace")))
        elif isinstance(target, int):
            if target >= 0:  # subprocess.DEVNULL and friends are negative: dropped
                os.write(target, data)
        elif hasattr(target, "write"):
            target.write(data if "b" in getattr(target, "mode", "") else data.decode("utf-8", "replace"))

    def summary(self) -> str:
        """``"; stderr: <last line>"``, or nothing."""
        lines = [line.strip() for line in self._data.decode("utf-8", "replace").splitlines() if line.strip()]
        return f"; stderr: {safe_text(lines[-1][:200])}" if lines else ""
