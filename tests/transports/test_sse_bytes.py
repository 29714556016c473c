"""SSEParser.feed_bytes: the events of feed, with the data as UTF-8 bytes, and one copy of a large line.

The HTTP client reads its SSE answers with it (issue 18: a 16 MiB blob over SSE cost the client
5.4x the payload, the data line held as bytes, as text, as the text's parts and encoded back).
"""

from __future__ import annotations

import tracemalloc

from hypothesis import given, settings
from hypothesis import strategies as st

from mcpkit.transports.sse_reader import SSEBytesEvent, SSEEvent, SSEEventTooLarge, SSEParser


def as_text(event: SSEBytesEvent) -> SSEEvent:
    return SSEEvent(event.data.decode("utf-8"), event.event, event.id, event.retry)


def both(
    stream: bytes, cuts: list[int], limit: int = 4096
) -> tuple[list[SSEEvent], list[SSEEvent], bool, bool]:
    """(feed's events, feed_bytes's as text, whether each raised) for ``stream`` cut at ``cuts``."""
    out: list[tuple[list[SSEEvent], bool]] = []
    for raw in (False, True):
        parser, got, raised, start = SSEParser(limit), [], False, 0
        try:
            for cut in [*sorted(c % (len(stream) + 1) for c in cuts), len(stream)]:
                piece = stream[start : max(start, cut)]
                got += [as_text(e) for e in parser.feed_bytes(piece)] if raw else parser.feed(piece)
                start = max(start, cut)
        except SSEEventTooLarge:
            raised = True
        out.append((got, raised))
    return out[0][0], out[1][0], out[0][1], out[1][1]


def test_fields_bom_crlf_and_invalid_utf8_as_bytes() -> None:
    stream = b'\xef\xbb\xbfid: 1\nretry: 250\n\n: ka\nevent: note\ndata: a\ndata:b\n\ndata: {"x": 1}\r\n\r\n'
    assert SSEParser(1024).feed_bytes(stream) == [
        SSEBytesEvent(data=b"", event="message", id="1", retry=250),
        SSEBytesEvent(data=b"a\nb", event="note", id="1"),
        SSEBytesEvent(data=b'{"x": 1}', id="1"),
    ]
    # Invalid UTF-8 is replaced as the text path replaces it (the standard's decoding).
    events = SSEParser(1024).feed_bytes(b"data: \xff\xfe\xc3\xa9 \xe2\x82\n\n")
    assert events == [SSEBytesEvent(data="\ufffd\ufffd\u00e9 \ufffd".encode())]
    assert SSEParser(1024).feed(b"data: \xff\xfe\xc3\xa9 \xe2\x82\n\n")[0].data == "\ufffd\ufffd\u00e9 \ufffd"
    # Valid non-ASCII longer than one validation slice, and a sequence cut by a slice boundary.
    text = ("\u00e9" * 40_000 + "\u20ac" * 30_000).encode()
    assert SSEParser(1 << 20).feed_bytes(b"data: " + text + b"\n\n")[0].data == text
    assert type(SSEParser(1024).feed_bytes(b"data: x\n\n")[0].data) is bytes


_tokens = st.sampled_from(
    [b"data: {}", b"data:x", b"data", b"event: e", b"id: 7", b"id: a\x00b", b"retry: 10", b"retry: x",
     b": ka", b"", b"\xef\xbb\xbfdata: bom", b"data: \xff\xfe", b"data: \xc3", b"\xc3:x", b"data:  two",
     b"data: \xc3\xa9", b"field", b"\xe2\x82:"]
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(
    lines=st.lists(st.one_of(_tokens, st.binary(max_size=12)), max_size=12),
    sep=st.sampled_from([b"\n", b"\r\n", b"\r"]),
    cuts=st.lists(st.integers(0, 400), max_size=4),
    limit=st.integers(8, 200),
)
def test_feed_bytes_gives_feeds_events(lines: list[bytes], sep: bytes, cuts: list[int], limit: int) -> None:
    stream = sep.join(lines) + sep + sep
    text, raw, text_raised, raw_raised = both(stream, cuts, limit)
    assert (raw, raw_raised) == (text, text_raised)


def test_a_large_data_line_is_held_about_once() -> None:
    size = 4 << 20
    body = b"data: " + b'{"blob":"' + b"A" * size + b'"}' + b"\n\n"
    chunks = [body[i : i + 65536] for i in range(0, len(body), 65536)]
    for raw in (True, False):
        parser = SSEParser(8 << 20)
        tracemalloc.start()
        try:
            events: list[object] = []
            for chunk in chunks:
                events += parser.feed_bytes(chunk) if raw else parser.feed(chunk)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert len(events) == 1
        # The line buffer (grown by 1/8 at a time) + the event's data; it was bytes + text +
        # partition + slice, 4x and more.
        assert peak < 2.4 * size, (raw, peak / size)
