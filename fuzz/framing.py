"""Newline framing of stdio (:class:`LineFramer`): bytes in, lines out, memory bounded.

Invariants, for any byte stream, line limit, and way of cutting the stream into chunks:

* the lines are those of a one-shot reference split (``\\r\\n`` or ``\\n``, blank lines skipped,
  a line longer than the limit reported once as ``OVERSIZED``), whatever the chunking;
* the framer never holds more than the limit of an unfinished line (``pending``);
* nothing raises.

Input layout: byte 0 picks the limit (1..64), bytes 1-4 the chunk cuts, the rest is the stream.
"""

from __future__ import annotations

from hypothesis import strategies as st

from mcpkit.protocol.framing import OVERSIZED, LineFramer, Oversized

from ._harness import Finding, Target, corpus_of, timed


def _reference(stream: bytes, limit: int) -> list[bytes | Oversized]:
    parts = stream.split(b"\n")
    out: list[bytes | Oversized] = []
    for i, line in enumerate(parts):
        if i == len(parts) - 1 and line == b"":
            break  # the stream ended with a newline
        if len(line) > limit:
            out.append(OVERSIZED)
            continue
        if line.endswith(b"\r"):
            line = line[:-1]
        if line.strip():
            out.append(line)
    return out


def one_input(data: bytes) -> None:
    if len(data) < 5:
        return
    limit = 1 + data[0] % 64
    cuts = sorted({c % (len(data) - 4) for c in data[1:5]})
    stream = data[5:]
    framer = LineFramer(limit)
    got: list[bytes | Oversized] = []
    start = 0
    for cut in [*cuts, len(stream)]:
        chunk = stream[start : max(start, min(cut, len(stream)))]
        got += framer.feed(chunk)
        if framer.pending > limit:
            raise Finding(f"the framer holds {framer.pending} bytes of a line, limit {limit}")
        start += len(chunk)
    got += framer.eof()
    expected = _reference(stream, limit)
    if got != expected:
        raise Finding(f"lines differ from the one-shot split: {got!r} != {expected!r} (limit {limit})")
    for line in got:
        if isinstance(line, Oversized) and len(line.head) > Oversized.HEAD_BYTES:
            raise Finding("an oversized line kept more than its head")


_lines = st.lists(
    st.one_of(
        st.binary(max_size=80),
        st.sampled_from([b"", b"\r", b" ", b'{"jsonrpc":"2.0","id":1,"method":"ping"}', b"\r\r"]),
    ),
    max_size=8,
)
strategy: st.SearchStrategy[bytes] = st.one_of(
    st.builds(
        lambda head, lines, end: head + b"\n".join(lines) + end,
        st.binary(min_size=5, max_size=5),
        _lines,
        st.sampled_from([b"", b"\n", b"\r\n"]),
    ),
    st.binary(min_size=5, max_size=300),
    st.sampled_from(corpus_of("framing") or [b"\x10\x00\x00\x00\x00a\nb\r\n\nc"]),
)

TARGET = Target("framing", timed(one_input), strategy, ("mcpkit.protocol.framing",))
