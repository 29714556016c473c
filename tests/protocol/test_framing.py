"""Newline-delimited framing: :class:`mcpkit.protocol.framing.LineFramer`."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcpkit.protocol.framing import DEFAULT_MAX_LINE_BYTES, OVERSIZED, LineFramer, Oversized

Output = list[bytes | Oversized]


def run(chunks: list[bytes], max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> Output:
    """Feed ``chunks`` one by one, then end the stream; everything emitted."""
    framer = LineFramer(max_line_bytes)
    out: Output = []
    for chunk in chunks:
        out += framer.feed(chunk)
        assert framer.pending <= max_line_bytes
    return out + framer.eof()


def bytewise(data: bytes) -> list[bytes]:
    return [data[i : i + 1] for i in range(len(data))]


def split_at(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    bounds = [0, *points, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


def reference(data: bytes, max_line_bytes: int) -> Output:
    """What the framer should emit for ``data``, independent of chunking.

    Lines end at ``\\n``; one trailing ``\\r`` is dropped; whitespace-only lines
    are skipped; a line (its CR included) over the limit becomes OVERSIZED. A
    final unterminated line is treated alike at end of stream.
    """
    out: Output = []
    for line in data.split(b"\n"):
        if len(line) > max_line_bytes:
            out.append(OVERSIZED)
            continue
        if line.endswith(b"\r"):
            line = line[:-1]
        if line.strip():
            out.append(line)
    return out


# -- unit tests --------------------------------------------------------------------


def test_lines_are_split_on_newline() -> None:
    framer = LineFramer()
    assert framer.feed(b'{"a":1}\n{"b":2}\n') == [b'{"a":1}', b'{"b":2}']
    assert framer.pending == 0


def test_partial_line_is_held_until_its_newline() -> None:
    framer = LineFramer()
    assert framer.feed(b'{"a":') == []
    assert framer.pending == 5
    assert framer.feed(b"1}\n{") == [b'{"a":1}']
    assert framer.pending == 1
    assert framer.feed(b"}\n") == [b"{}"]
    assert framer.pending == 0


def test_crlf_is_stripped() -> None:
    assert run([b"one\r\ntwo\r\n"]) == [b"one", b"two"]
    assert run([b"one\r", b"\ntwo\r\n"]) == [b"one", b"two"]


def test_only_one_trailing_cr_is_stripped_and_inner_cr_kept() -> None:
    assert run([b"a\rb\r\r\n"]) == [b"a\rb\r"]


def test_blank_and_whitespace_lines_are_skipped() -> None:
    assert run([b"\n\r\n  \n\t\r\nx\n\n"]) == [b"x"]


def test_lines_keep_inner_whitespace() -> None:
    assert run([b"  {} \n"]) == [b"  {} "]


def test_eof_returns_final_unterminated_line() -> None:
    framer = LineFramer()
    assert framer.feed(b"a\nb") == [b"a"]
    assert framer.eof() == [b"b"]
    assert framer.pending == 0
    assert framer.eof() == []


def test_eof_strips_cr_and_skips_blank_tail() -> None:
    framer = LineFramer()
    framer.feed(b"tail\r")
    assert framer.eof() == [b"tail"]
    framer.feed(b"   ")
    assert framer.eof() == []


def test_eof_on_empty_stream() -> None:
    assert LineFramer().eof() == []


def test_framer_is_reusable_after_eof() -> None:
    framer = LineFramer(4)
    framer.feed(b"toolong")
    assert framer.eof() == [OVERSIZED]
    assert framer.feed(b"ok\n") == [b"ok"]


def test_line_at_the_limit_passes_and_one_over_is_oversized() -> None:
    assert run([b"abcd\n"], 4) == [b"abcd"]
    assert run([b"abcde\n"], 4) == [OVERSIZED]
    assert run(bytewise(b"abcd\n"), 4) == [b"abcd"]
    assert run(bytewise(b"abcde\n"), 4) == [OVERSIZED]


def test_oversized_line_is_reported_once_and_neighbours_survive() -> None:
    long = b"x" * 100
    for chunks in (
        [b"a\n" + long + b"\nb\n"],
        bytewise(b"a\n" + long + b"\nb\n"),
        [b"a\n" + long[:50], long[50:] + b"\nb\n"],
    ):
        assert run(chunks, 10) == [b"a", OVERSIZED, b"b"]


def test_oversized_line_is_reported_when_its_newline_arrives() -> None:
    framer = LineFramer(8)
    assert framer.feed(b"x" * 20) == []
    assert framer.pending == 0  # dropped as it streams in
    assert framer.feed(b"x" * 20) == []
    assert framer.pending == 0
    assert framer.feed(b"x\nok\n") == [OVERSIZED, b"ok"]


def test_oversized_unterminated_line_is_reported_at_eof() -> None:
    framer = LineFramer(8)
    framer.feed(b"y" * 9)
    assert framer.pending == 0
    assert framer.eof() == [OVERSIZED]


def test_pending_never_exceeds_the_limit() -> None:
    framer = LineFramer(16)
    for _ in range(100):
        framer.feed(b"z" * 7)
        assert framer.pending <= 16


def test_crlf_line_at_the_limit_does_not_depend_on_chunking() -> None:
    data = b"abcd\r\nxy\n"
    assert run([data], 4) == run([b"abcd\r", b"\nxy\n"], 4) == run(bytewise(data), 4)


def test_max_line_bytes_must_be_positive() -> None:
    with pytest.raises(ValueError):
        LineFramer(0)
    assert LineFramer(1).feed(b"a\nab\n") == [b"a", OVERSIZED]


def test_oversized_marker() -> None:
    assert repr(OVERSIZED) == "OVERSIZED"
    assert isinstance(OVERSIZED, Oversized)


def test_emitted_lines_are_bytes() -> None:
    framer = LineFramer()
    framer.feed(b"ab")
    (line,) = framer.feed(b"c\n")
    assert type(line) is bytes
    assert line == b"abc"


# -- properties --------------------------------------------------------------------

# Small alphabets and limits so newlines, CRs, blanks and over-long lines are all common.
_stream = st.binary(max_size=120) | st.lists(
    st.sampled_from([b"a", b"{}", b" ", b"\r", b"\n", b"\r\n", b"xyz"]), max_size=60
).map(b"".join)
_limit = st.integers(min_value=1, max_value=12)


@given(_stream, _limit, st.lists(st.integers(min_value=0), max_size=20))
def test_chunking_does_not_change_the_output(data: bytes, limit: int, cuts: list[int]) -> None:
    whole = run([data], limit)
    assert run(bytewise(data), limit) == whole
    assert run(split_at(data, cuts), limit) == whole


@given(_stream, _limit, st.lists(st.integers(min_value=0), max_size=20))
def test_output_matches_the_reference(data: bytes, limit: int, cuts: list[int]) -> None:
    assert run(split_at(data, cuts), limit) == reference(data, limit)


@given(
    st.lists(st.binary(max_size=30).map(lambda b: b.replace(b"\n", b"")), max_size=10),
    _limit,
    st.lists(st.integers(min_value=0), max_size=20),
)
def test_every_line_gives_one_item_or_is_blank(lines: list[bytes], limit: int, cuts: list[int]) -> None:
    data = b"".join(line + b"\n" for line in lines)
    out = run(split_at(data, cuts), limit)
    expected = [
        OVERSIZED if len(line) > limit else line.removesuffix(b"\r")
        for line in lines
        if len(line) > limit or line.removesuffix(b"\r").strip()
    ]
    assert out == expected
    assert out.count(OVERSIZED) == sum(len(line) > limit for line in lines)


@given(
    st.integers(min_value=1, max_value=64),
    st.integers(min_value=1, max_value=500),
    st.lists(st.integers(min_value=0), max_size=30),
)
def test_oversized_line_is_one_marker_and_bounded_buffer(limit: int, extra: int, cuts: list[int]) -> None:
    data = b"before\n" + b"q" * (limit + extra) + b"\nafter\n"
    framer = LineFramer(max(limit, 6))
    out: Output = []
    for chunk in split_at(data, cuts):
        out += framer.feed(chunk)
        assert framer.pending <= framer.max_line_bytes
    out += framer.eof()
    oversized = limit + extra > framer.max_line_bytes
    assert out == (
        [b"before", OVERSIZED, b"after"] if oversized else [b"before", b"q" * (limit + extra), b"after"]
    )
