"""Newline-delimited framing (basic/transports/stdio): bytes in, lines out.

The framer never holds more than ``max_line_bytes`` of an unfinished line: an
over-long line is dropped as it streams in and reported once, as
:data:`OVERSIZED`, when its newline arrives, so a hostile peer cannot make us
buffer an unbounded message.
"""

from __future__ import annotations

from typing import Final

__all__ = ["DEFAULT_MAX_LINE_BYTES", "OVERSIZED", "LineFramer", "Oversized"]

# Large enough for a sizeable embedded blob, small enough to bound memory per
# connection. Transports expose it as a setting.
DEFAULT_MAX_LINE_BYTES: Final = 4 * 1024 * 1024


class Oversized:
    """A line that exceeded the limit and was discarded.

    ``head`` keeps its first bytes, enough to find the request id so the error
    answer can still be correlated; ``limit`` is the limit it exceeded (0:
    unknown). All instances compare equal.
    """

    __slots__ = ("head", "limit")

    HEAD_BYTES: Final = 256

    def __init__(self, head: bytes = b"", limit: int = 0) -> None:
        self.head = head
        self.limit = limit

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Oversized)

    def __hash__(self) -> int:
        return hash(Oversized)

    def __repr__(self) -> str:
        return "OVERSIZED"


OVERSIZED: Final = Oversized()


class LineFramer:
    """Split a byte stream into lines, enforcing a maximum line size."""

    def __init__(self, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> None:
        if max_line_bytes < 1:
            raise ValueError("max_line_bytes must be positive")
        self.max_line_bytes = max_line_bytes
        self._buffer = bytearray()
        self._discarding = False
        self._head = b""

    def feed(self, data: bytes) -> list[bytes | Oversized]:
        """Add bytes; return every line completed by them (without the newline).

        Blank lines are skipped and a trailing ``\\r`` is removed.
        """
        out: list[bytes | Oversized] = []
        start = 0
        find = data.find
        while True:
            end = find(b"\n", start)
            if end < 0:
                break
            if self._discarding:
                self._discarding = False
                self._buffer.clear()
                out.append(Oversized(self._head, self.max_line_bytes))
                self._head = b""
            else:
                if self._buffer:
                    self._buffer += data[start:end]
                    line = bytes(self._buffer)
                    self._buffer.clear()
                else:
                    line = data[start:end]
                self._emit(line, out)
            start = end + 1
        if start < len(data) and not self._discarding:
            self._buffer += data[start:]
            if len(self._buffer) > self.max_line_bytes:
                self._head = bytes(self._buffer[: Oversized.HEAD_BYTES])
                self._buffer.clear()
                self._discarding = True
        return out

    def _emit(self, line: bytes, out: list[bytes | Oversized]) -> None:
        # The limit counts a trailing \r, as the buffer did while the line was
        # incomplete, so the verdict never depends on where chunks split.
        if len(line) > self.max_line_bytes:
            out.append(Oversized(line[: Oversized.HEAD_BYTES], self.max_line_bytes))
            return
        if line.endswith(b"\r"):
            line = line[:-1]
        if line.strip():
            out.append(line)

    @property
    def discarding(self) -> Oversized | None:
        """The over-long line being dropped right now (its head and the limit), before its
        newline has come, or None: a client can fail the request it answers at once
        instead of after the rest of it (a hostile server's 1 GiB line) has streamed by."""
        return Oversized(self._head, self.max_line_bytes) if self._discarding else None

    @property
    def pending(self) -> int:
        """Bytes of an unfinished line held right now."""
        return len(self._buffer)

    def eof(self) -> list[bytes | Oversized]:
        """The stream ended: return a final unterminated line, if any."""
        out: list[bytes | Oversized] = []
        if self._discarding:
            out.append(Oversized(self._head, self.max_line_bytes))
            self._head = b""
        elif self._buffer:
            self._emit(bytes(self._buffer), out)
        self._buffer.clear()
        self._discarding = False
        return out
