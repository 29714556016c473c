"""The HTTP client's bounded SSE parser (WHATWG "Interpreting an event stream")."""

from __future__ import annotations

import pytest

from mcpkit.transports.sse_reader import SSEEvent, SSEEventTooLarge, SSEParser

STREAM = (
    b'\xef\xbb\xbfid: 1\nretry: 250\n\n: keep-alive\nevent: note\ndata: a\ndata:b\n\ndata: {"x": 1}\r\n\r\n'
)
EXPECTED = [
    SSEEvent(data="", event="message", id="1", retry=250),
    SSEEvent(data="a\nb", event="note", id="1"),
    SSEEvent(data='{"x": 1}', id="1"),
]


def feed_all(parser: SSEParser, chunks: list[bytes]) -> list[SSEEvent]:
    return [event for chunk in chunks for event in parser.feed(chunk)]


def test_events_fields_comments_bom_and_crlf() -> None:
    assert SSEParser(1024).feed(STREAM) == EXPECTED


def test_any_split_of_the_stream_gives_the_same_events() -> None:
    for size in (1, 2, 3, 7):
        chunks = [STREAM[i : i + size] for i in range(0, len(STREAM), size)]
        assert feed_all(SSEParser(1024), chunks) == EXPECTED, size


def test_a_lone_cr_ends_a_line_even_across_chunks() -> None:
    parser = SSEParser(1024)
    assert parser.feed(b"data: x\r") == []
    assert parser.feed(b"\r") == [SSEEvent(data="x")]
    assert parser.feed(b"\ndata: y\r\n\r\n") == [SSEEvent(data="y")]


def test_invalid_utf8_is_replaced_and_ids_with_nul_are_ignored() -> None:
    events = SSEParser(1024).feed(b"id: a\x00b\ndata: \xff\xfe\n\n")
    assert events == [SSEEvent(data="\ufffd\ufffd", id="")]


def test_a_retry_that_is_not_digits_is_ignored() -> None:
    assert SSEParser(1024).feed(b"retry: 1e3\ndata: x\n\n") == [SSEEvent(data="x")]


def test_one_long_line_is_refused_once_past_the_limit_not_at_its_end() -> None:
    parser = SSEParser(100)
    parser.feed(b"data: " + b"a" * 90)
    with pytest.raises(SSEEventTooLarge, match="100 bytes"):
        parser.feed(b"a" * 20)  # no newline yet: refused all the same


def test_many_data_lines_without_a_blank_line_are_refused() -> None:
    parser = SSEParser(100)
    with pytest.raises(SSEEventTooLarge):
        for _ in range(20):
            parser.feed(b"data: 123456789\n")


def test_the_limit_is_per_event() -> None:
    parser = SSEParser(100)
    events = feed_all(parser, [b"data: " + b"x" * 80 + b"\n\n"] * 50)
    assert len(events) == 50


def test_comments_do_not_accumulate_but_one_huge_comment_is_refused() -> None:
    parser = SSEParser(100)
    assert feed_all(parser, [b": ping\n"] * 1000) == []
    with pytest.raises(SSEEventTooLarge):
        parser.feed(b":" + b"p" * 200)


def test_limit_must_be_positive() -> None:
    with pytest.raises(ValueError):
        SSEParser(0)


def test_a_comment_split_across_reads_is_bounded_on_its_own() -> None:
    # Found by fuzz/sse.py: a keep-alive cut by a read boundary while an event was being
    # read counted that event's bytes too, so whether a stream within its limit was refused
    # depended on where TCP cut it.
    stream = b"data: 01234\n: abcdefg\n\n"
    for cut in range(len(stream) + 1):
        parser = SSEParser(16)
        events = parser.feed(stream[:cut]) + parser.feed(stream[cut:])
        assert [e.data for e in events] == ["01234"], cut
    with pytest.raises(SSEEventTooLarge):
        SSEParser(16).feed(b"data: 1\n: " + b"c" * 20)
