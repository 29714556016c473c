"""Lone surrogate escapes (``"\\ud800"``): valid JSON that msgspec refuses, read with U+FFFD.

Found by fuzzing (issue 17): JavaScript's ``JSON.stringify`` escapes half a surrogate
pair, e.g. a string cut in the middle of an emoji. Such a request used to be answered
-32700 with a null id, so the client waited for its timeout. It is now decoded with
U+FFFD in place of each unpaired surrogate and served under its own id.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcpkit.protocol.errors import PARSE_ERROR, ProtocolError
from mcpkit.protocol.jsonrpc import Request, decode_message, decode_raw, replace_lone_surrogates

#: "hi 😀" cut after 4 UTF-16 code units, as a JavaScript string is, then stringified.
CUT_EMOJI = json.dumps("hi \U0001f600".encode("utf-16-le")[:8].decode("utf-16-le", "surrogatepass"))


def request_line(arguments: str, rid: int | str = 7) -> bytes:
    return (
        b'{"jsonrpc":"2.0","id":'
        + json.dumps(rid).encode()
        + b',"method":"tools/call","params":{"name":"echo","arguments":{"text":'
        + arguments.encode()
        + b"}}}"
    )


@pytest.mark.parametrize("rid", [7, "req-7"])
def test_request_with_a_lone_high_surrogate_keeps_its_id(rid: int | str) -> None:
    message = decode_message(request_line('"cut \\ud83d"', rid))
    assert isinstance(message, Request)
    assert message.id == rid
    assert decode_raw(message.params) == {"name": "echo", "arguments": {"text": "cut \ufffd"}}


def test_javascript_stringify_output_is_read() -> None:
    assert CUT_EMOJI == '"hi \\ud83d"'
    message = decode_message(request_line(CUT_EMOJI))
    assert isinstance(message, Request)
    assert decode_raw(message.params)["arguments"]["text"] == "hi \ufffd"


@pytest.mark.parametrize(
    ("escaped", "text"),
    [
        ("\\ud800", "\ufffd"),  # high alone, at the end of the string
        ("\\udc00", "\ufffd"),  # low alone
        ("\\udc00\\ud800", "\ufffd\ufffd"),  # the halves in the wrong order
        ("\\ud800\\ud83d\\ude00", "\ufffd\U0001f600"),  # a stray high before a real pair
        ("\\ud83d\\ude00\\ude00", "\U0001f600\ufffd"),  # a stray low after one
        ("\\uD800x", "\ufffdx"),  # upper-case hex
        ("\\ud800\\u0041", "\ufffdA"),  # a high surrogate before an ordinary escape
        ("\\\\ud800", "\\ud800"),  # an escaped backslash then text: no surrogate at all
        ("\\\\\\ud800", "\\\ufffd"),  # an escaped backslash, then a real lone escape
    ],
)
def test_unpaired_halves_become_replacement_characters(escaped: str, text: str) -> None:
    message = decode_message(request_line(f'"{escaped}"'))
    assert isinstance(message, Request)
    assert decode_raw(message.params)["arguments"]["text"] == text


def test_surrogates_in_keys_method_and_id_are_replaced() -> None:
    message = decode_message(b'{"jsonrpc":"2.0","id":"a\\udfff","method":"x\\ud800","params":{"\\ud800":1}}')
    assert message == Request("a\ufffd", "x\ufffd", message.params)  # type: ignore[union-attr]
    assert decode_raw(message.params) == {"\ufffd": 1}  # type: ignore[union-attr]


def test_batch_elements_are_replaced_too() -> None:
    elements = decode_message(
        b"[" + request_line('"\\ud800"', 1) + b"," + request_line('"ok"', 2) + b"]", allow_batch=True
    )
    assert isinstance(elements, list)
    first = decode_message(elements[0])
    assert isinstance(first, Request) and first.id == 1
    assert decode_raw(first.params)["arguments"]["text"] == "\ufffd"


def test_real_parse_errors_stay_parse_errors() -> None:
    with pytest.raises(ProtocolError) as info:
        decode_message(b'{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":"\\ud800"')
    assert info.value.code == PARSE_ERROR


def test_nothing_to_replace_is_none() -> None:
    assert replace_lone_surrogates(b'{"a":"\\ud83d\\ude00 \\\\ud800 \\n"}') is None
    assert replace_lone_surrogates(b"garbage") is None


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.text(st.characters(exclude_categories=())), st.integers(0, 2**31))
def test_any_python_string_round_trips_through_an_ascii_escaped_request(text: str, rid: int) -> None:
    """json.dumps (like JSON.stringify) escapes lone surrogates; every such request is read
    under its own id, with exactly the unpaired surrogates replaced."""
    line = json.dumps({"jsonrpc": "2.0", "id": rid, "method": "m", "params": {"t": text}}).encode()
    message = decode_message(line)
    assert isinstance(message, Request) and message.id == rid
    expected = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    assert decode_raw(message.params) == {"t": expected}
