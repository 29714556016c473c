"""The HTTP client's Server-Sent Events parser (WHATWG HTML "Interpreting an event stream").

The stream comes from the server, which may be hostile. Invariants, for any bytes, any event
size limit and any way the bytes are cut into chunks:

* the events are those of a one-shot reference parser written from the standard
  (lines end in CRLF, CR or LF, a leading BOM is dropped, ``data`` lines are joined with LF,
  the last event id carries over and one holding NUL is ignored) whatever the chunking, and
  a CR at the end of one chunk with the LF at the start of the next is one line end;
* an event larger than the limit raises :class:`SSEEventTooLarge`, and only then; the events
  before it are delivered first;
* the parser never holds more than the limit of an unfinished line.

Input layout: byte 0 picks the limit (16..1039), bytes 1-4 the chunk cuts, the rest is the stream.
"""

from __future__ import annotations

import re

from hypothesis import strategies as st

from mcpkit.transports.sse_reader import SSEEvent, SSEEventTooLarge, SSEParser

from ._harness import Finding, Target, corpus_of, timed

_LINE_END = re.compile(rb"\r\n|\r|\n")


def _reference(stream: bytes, limit: int) -> tuple[list[SSEEvent], bool]:
    """(events, whether some event exceeds the limit). An event is dispatched when one of its
    fields was read, even without data (mcpkit hands those over for their id; the standard
    drops them, and so does the client's consumer, which skips events without data)."""
    if stream.startswith(b"\xef\xbb\xbf"):
        stream = stream[3:]
    parts = _LINE_END.split(stream)
    complete, partial = parts[:-1], parts[-1]
    events: list[SSEEvent] = []
    data: list[str] = []
    kind, last_id, retry, size, seen = "", "", None, 0, False
    for raw in complete:
        if not raw:
            if seen:
                events.append(SSEEvent("\n".join(data), kind or "message", last_id, retry))
            data, kind, retry, size, seen = [], "", None, 0, False
            continue
        if raw.startswith(b":"):  # a comment (keep-alive): not part of the event, but bounded
            if len(raw) > limit:
                return events, True
            continue
        size += len(raw) + 1
        if size > limit:
            return events, True
        name, colon, value = raw.decode("utf-8", "replace").partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        seen = seen or name in ("data", "event", "id", "retry")
        if name == "data":
            data.append(value)
        elif name == "event":
            kind = value
        elif name == "id" and "\x00" not in value:
            last_id = value
        elif name == "retry" and value.isascii() and value.isdigit():
            retry = int(value)
    too_big = (len(partial) if partial.startswith(b":") else size + len(partial)) > limit
    return events, too_big


def one_input(data: bytes) -> None:
    if len(data) < 5:
        return
    limit = 16 + (data[0] * 4 % 1024)
    stream = data[5:]
    cuts = sorted({c % (len(stream) + 1) for c in data[1:5]})
    parser = SSEParser(limit)
    got: list[SSEEvent] = []
    raised = False
    start = 0
    try:
        for cut in [*cuts, len(stream)]:
            got += parser.feed(stream[start : max(start, cut)])
            start = max(start, cut)
            if len(parser._buffer) > limit:
                raise Finding(f"the parser holds {len(parser._buffer)} bytes of a line (limit {limit})")
    except SSEEventTooLarge:
        raised = True
    expected, too_big = _reference(stream, limit)
    if raised != too_big:
        raise Finding(
            f"SSEEventTooLarge raised={raised}, expected {too_big} (limit {limit}): {stream[:300]!r}"
        )
    if raised:
        if got != expected[: len(got)]:
            raise Finding(f"events before the oversized one differ: {got!r} vs {expected!r}")
    elif got != expected:
        raise Finding(f"events differ from the reference: {got!r} != {expected!r}; stream {stream[:300]!r}")


_lines = st.lists(
    st.one_of(
        st.sampled_from(
            [b"data: {}", b"data:x", b"data", b"event: message", b"event:", b"id: 7", b"id: a\x00b",
             b"retry: 10", b"retry: x", b": keep-alive", b"", b"\xef\xbb\xbfdata: bom", b"data: \xff\xfe",
             b"field", b"data:  two"]
        ),
        st.binary(max_size=20),
    ),
    max_size=12,
)  # fmt: skip
strategy: st.SearchStrategy[bytes] = st.one_of(
    st.builds(
        lambda head, lines, sep: head + sep.join(lines) + sep + sep,
        st.binary(min_size=5, max_size=5),
        _lines,
        st.sampled_from([b"\n", b"\r\n", b"\r"]),
    ),
    st.binary(min_size=5, max_size=300),
    st.sampled_from(corpus_of("sse") or [b"\x10\x01\x02\x03\x04data: x\n\n"]),
)

TARGET = Target("sse", timed(one_input), strategy, ("mcpkit.transports.sse_reader",))
