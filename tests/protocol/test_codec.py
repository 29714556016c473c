"""The JSON-RPC envelope: :func:`mcpkit.protocol.jsonrpc.decode_message` and the encoders."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcpkit.protocol.errors import INVALID_REQUEST, PARSE_ERROR, ProtocolError
from mcpkit.protocol.jsonrpc import (
    ErrorObject,
    ErrorResponse,
    Notification,
    Request,
    Response,
    decode_message,
    decode_raw,
    encode,
    encode_error,
    encode_notification,
    encode_request,
    encode_result,
)


def decode(doc: Any, **kwargs: Any) -> Any:
    return decode_message(json.dumps(doc).encode(), **kwargs)


def refusal(data: bytes, **kwargs: Any) -> ProtocolError:
    with pytest.raises(ProtocolError) as info:
        decode_message(data, **kwargs)
    return info.value


def deep(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


# -- classification --------------------------------------------------------------


@pytest.mark.parametrize("rid", [0, 1, -5, 2**63, 10**30, "", "abc", "1"])
def test_request_is_classified_with_its_id(rid: int | str) -> None:
    message = decode({"jsonrpc": "2.0", "id": rid, "method": "tools/list", "params": {"cursor": "x"}})
    assert isinstance(message, Request)
    assert (message.id, message.method) == (rid, "tools/list")
    assert type(message.id) is type(rid)
    assert decode_raw(message.params) == {"cursor": "x"}


def test_request_without_params_has_none() -> None:
    message = decode({"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert message == Request(1, "ping", None)


def test_params_stay_an_undecoded_slice_of_the_input() -> None:
    data = b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"a": [1, 2.5, "x"]}}'
    message = decode_message(data)
    assert isinstance(message.params, msgspec.Raw)
    assert bytes(message.params) == b'{"a": [1, 2.5, "x"]}'


def test_notification_is_classified() -> None:
    message = decode({"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert message == Notification("notifications/initialized", None)
    message = decode({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}})
    assert isinstance(message, Notification)
    assert decode_raw(message.params) == {"progress": 1}


@pytest.mark.parametrize("result", [{}, {"tools": []}, None, [], 0, "x"])
def test_response_is_classified(result: Any) -> None:
    message = decode({"jsonrpc": "2.0", "id": "r1", "result": result})
    assert isinstance(message, Response)
    assert message.id == "r1"
    assert decode_raw(message.result) == result


def test_error_response_is_classified() -> None:
    message = decode({"jsonrpc": "2.0", "id": 3, "error": {"code": -32601, "message": "nope", "data": [1]}})
    assert message == ErrorResponse(3, ErrorObject(-32601, "nope", [1]))


def test_error_response_may_have_a_null_id() -> None:
    message = decode({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}})
    assert message == ErrorResponse(None, ErrorObject(-32700, "Parse error"))
    assert message.error.data is msgspec.UNSET


def test_unknown_members_are_ignored() -> None:
    message = decode({"jsonrpc": "2.0", "id": 1, "method": "m", "extra": {"x": [1]}})
    assert message == Request(1, "m", None)


def test_raw_input_is_accepted() -> None:
    assert decode_message(msgspec.Raw(b'{"jsonrpc":"2.0","method":"m"}')) == Notification("m", None)


# -- ids -------------------------------------------------------------------------


@pytest.mark.parametrize("rid", [None, True, False, 1.5, 1.0, -0.0, 1e3, [], {}, [1]])
def test_request_id_must_be_string_or_integer(rid: Any) -> None:
    error = refusal(json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/list"}).encode())
    assert error.code == INVALID_REQUEST
    assert error.request_id is None


@pytest.mark.parametrize("rid", [None, True, 1.5, []])
def test_response_id_must_be_string_or_integer(rid: Any) -> None:
    error = refusal(json.dumps({"jsonrpc": "2.0", "id": rid, "result": {}}).encode())
    assert error.code == INVALID_REQUEST


@pytest.mark.parametrize("rid", [True, 1.5, [], {}])
def test_error_response_id_must_be_string_integer_or_null(rid: Any) -> None:
    error = refusal(json.dumps({"jsonrpc": "2.0", "id": rid, "error": {"code": 1, "message": "x"}}).encode())
    assert error.code == INVALID_REQUEST


def test_error_response_needs_an_id_member() -> None:
    assert refusal(b'{"jsonrpc":"2.0","error":{"code":1,"message":"x"}}').code == INVALID_REQUEST


# -- invalid requests (-32600), with the id when it can be read ------------------------


@pytest.mark.parametrize(
    "doc",
    [
        {"id": 9, "method": "m"},
        {"jsonrpc": "1.0", "id": 9, "method": "m"},
        {"jsonrpc": 2.0, "id": 9, "method": "m"},
        {"jsonrpc": None, "id": 9, "method": "m"},
        {"jsonrpc": "2.0 ", "id": 9, "method": "m"},
    ],
    ids=["missing", "1.0", "number", "null", "padded"],
)
def test_jsonrpc_member_must_be_2_0(doc: dict[str, Any]) -> None:
    error = refusal(json.dumps(doc).encode())
    assert (error.code, error.request_id) == (INVALID_REQUEST, 9)


@pytest.mark.parametrize("method", [None, 5, ["m"], {"m": 1}, True])
def test_method_must_be_a_string(method: Any) -> None:
    error = refusal(json.dumps({"jsonrpc": "2.0", "id": "a", "method": method}).encode())
    assert (error.code, error.request_id) == (INVALID_REQUEST, "a")


@pytest.mark.parametrize(
    "doc",
    [{"jsonrpc": "2.0"}, {"jsonrpc": "2.0", "id": 4}, {"jsonrpc": "2.0", "params": {}}],
    ids=["bare", "id-only", "params-only"],
)
def test_message_without_method_result_or_error_is_refused(doc: dict[str, Any]) -> None:
    error = refusal(json.dumps(doc).encode())
    assert error.code == INVALID_REQUEST
    assert error.request_id == doc.get("id")


@pytest.mark.parametrize("params", [5, "x", None, True, 1.5])
def test_params_must_be_structured(params: Any) -> None:
    for doc in (
        {"jsonrpc": "2.0", "id": 2, "method": "m", "params": params},
        {"jsonrpc": "2.0", "method": "m"},
    ):
        doc["params"] = params
        error = refusal(json.dumps(doc).encode())
        assert error.code == INVALID_REQUEST
        assert error.request_id == doc.get("id")


def test_params_must_be_an_object_not_an_array() -> None:
    error = refusal(b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":["get_weather"]}')
    assert (error.code, error.request_id) == (INVALID_REQUEST, 2)


@pytest.mark.parametrize(
    "doc",
    [
        {"jsonrpc": "2.0", "id": 1, "result": {}, "error": {"code": 1, "message": "x"}},
        {"jsonrpc": "2.0", "id": 1, "method": "m", "result": {}},
        {"jsonrpc": "2.0", "id": 1, "method": "m", "error": {"code": 1, "message": "x"}},
    ],
    ids=["result+error", "method+result", "method+error"],
)
def test_ambiguous_messages_are_refused(doc: dict[str, Any]) -> None:
    error = refusal(json.dumps(doc).encode())
    assert (error.code, error.request_id) == (INVALID_REQUEST, 1)


@pytest.mark.parametrize(
    "error_member",
    [
        5,
        "x",
        None,
        [],
        {"code": "1", "message": "x"},
        {"code": 1},
        {"message": "x"},
        {"code": 1.5, "message": "x"},
    ],
)
def test_malformed_error_object_is_refused(error_member: Any) -> None:
    error = refusal(json.dumps({"jsonrpc": "2.0", "id": 8, "error": error_member}).encode())
    assert (error.code, error.request_id) == (INVALID_REQUEST, 8)


@pytest.mark.parametrize("doc", [5, "x", None, True, 1.5])
def test_non_object_message_is_an_invalid_request(doc: Any) -> None:
    assert refusal(json.dumps(doc).encode()).code == INVALID_REQUEST


# -- parse errors (-32700) ---------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"   ",
        b"{",
        b'{"jsonrpc":"2.0",}',
        b"{'jsonrpc':'2.0'}",
        b'{"jsonrpc":"2.0","method":"m"} trailing',
        b'{"jsonrpc":"2.0","method":"m"}{"jsonrpc":"2.0","method":"m"}',
        b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":NaN}}',
        b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":01}}',
        b"\xef\xbb\xbf{}",
    ],
    ids=[
        "empty",
        "blank",
        "truncated",
        "trailing-comma",
        "single-quotes",
        "trailing-data",
        "two-messages",
        "nan",
        "leading-zero",
        "bom",
    ],
)
def test_malformed_json_is_a_parse_error(data: bytes) -> None:
    assert refusal(data).code == PARSE_ERROR


@pytest.mark.parametrize(
    "data",
    [
        b'{"jsonrpc":"2.0","id":1,"method":"\xff"}',
        b'{"jsonrpc":"2.\xc0","id":1,"method":"m"}',
        b'{"jsonrpc":"2.0","id":"\xed\xa0\x80","method":"m"}',
    ],
    # A lone surrogate *escape* is valid JSON, read with U+FFFD: test_surrogates.py.
    ids=["bad-byte-in-method", "overlong-in-jsonrpc", "surrogate-bytes-in-id"],
)
def test_invalid_utf8_in_the_envelope_is_a_parse_error(data: bytes) -> None:
    assert refusal(data).code == PARSE_ERROR


@pytest.mark.parametrize(
    "data",
    [
        b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":"\xff"}}',
        b'{"jsonrpc":"2.0","method":"m","params":{"a":"\xed\xa0\x80"}}',
        b'{"jsonrpc":"2.0","id":1,"result":{"a":"\xc3"}}',
        b'{"jsonrpc":"2.0","id":1,"method":"m","x":"\xff"}',
    ],
    ids=["params", "notification-params", "result", "unknown-member"],
)
def test_invalid_utf8_anywhere_is_a_parse_error(data: bytes) -> None:
    assert refusal(data).code == PARSE_ERROR


@pytest.mark.parametrize(
    "template",
    [
        b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":%s}}',
        b'{"jsonrpc":"2.0","id":1,"method":"m","params":%s}',
        b'{"jsonrpc":"2.0","id":1,"method":"m","x":%s}',
        b'{"jsonrpc":"2.0","id":1,"result":%s}',
        b'{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"m","data":%s}}',
    ],
    ids=["in-params", "as-params", "unknown-member", "result", "error-data"],
)
def test_too_deep_nesting_is_a_parse_error(template: bytes) -> None:
    assert refusal(template % deep(100_000)).code == PARSE_ERROR


def test_too_deep_batch_is_a_parse_error() -> None:
    assert refusal(deep(100_000), allow_batch=True).code == PARSE_ERROR


def test_moderate_nesting_is_fine() -> None:
    message = decode_message(b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":%s}}' % deep(200))
    assert isinstance(message, Request)


# -- batches -----------------------------------------------------------------------


def test_batch_refused_unless_allowed() -> None:
    data = b'[{"jsonrpc":"2.0","method":"m"}]'
    assert refusal(data).code == INVALID_REQUEST


def test_batch_is_split_into_raw_elements() -> None:
    data = b'[{"jsonrpc":"2.0","id":1,"method":"a"}, {"jsonrpc":"2.0","method":"b"}, 5]'
    elements = decode_message(data, allow_batch=True)
    assert isinstance(elements, list)
    assert [bytes(e) for e in elements] == [
        b'{"jsonrpc":"2.0","id":1,"method":"a"}',
        b'{"jsonrpc":"2.0","method":"b"}',
        b"5",
    ]
    assert decode_message(elements[0]) == Request(1, "a", None)
    assert decode_message(elements[1]) == Notification("b", None)
    assert refusal(bytes(elements[2])).code == INVALID_REQUEST


def test_empty_batch_is_an_invalid_request() -> None:
    assert refusal(b"[]", allow_batch=True).code == INVALID_REQUEST


def test_single_message_still_decodes_when_batches_are_allowed() -> None:
    assert decode_message(b'{"jsonrpc":"2.0","method":"m"}', allow_batch=True) == Notification("m", None)


# -- encoders ----------------------------------------------------------------------


def test_encoders_build_json_rpc_messages() -> None:
    assert json.loads(encode_request(1, "tools/list")) == {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    assert json.loads(encode_request("a", "m", {"x": 1})) == {
        "jsonrpc": "2.0",
        "id": "a",
        "method": "m",
        "params": {"x": 1},
    }
    assert json.loads(encode_notification("n")) == {"jsonrpc": "2.0", "method": "n"}
    assert json.loads(encode_notification("n", {})) == {"jsonrpc": "2.0", "method": "n", "params": {}}
    assert json.loads(encode_result(2, {})) == {"jsonrpc": "2.0", "id": 2, "result": {}}
    assert json.loads(encode_result(2, None)) == {"jsonrpc": "2.0", "id": 2, "result": None}
    assert json.loads(encode_error(None, -32700, "Parse error")) == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32700, "message": "Parse error"},
    }
    assert json.loads(encode_error(3, -32602, "bad", {"uri": "x"}))["error"]["data"] == {"uri": "x"}
    assert json.loads(encode_error(3, -32602, "bad", None))["error"]["data"] is None


def test_encode_is_compact() -> None:
    assert encode({"a": [1, 2]}) == b'{"a":[1,2]}'
    assert b"\n" not in encode_result(1, {"text": "line1\nline2"})


def test_decode_raw() -> None:
    assert decode_raw(None) is None
    assert decode_raw(msgspec.Raw(b'{"a":1}')) == {"a": 1}


# -- properties --------------------------------------------------------------------

_text = st.text(st.characters(exclude_categories=("Cs",)), max_size=20)
_ids = st.one_of(st.integers(min_value=-(2**70), max_value=2**70), _text)
_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=4),
    max_leaves=12,
)
_params = st.none() | st.dictionaries(_text, _json, max_size=4)


@st.composite
def messages(draw: st.DrawFn) -> tuple[str, bytes, dict[str, Any]]:
    """(kind, bytes from mcpkit's encoders, the fields that went in)."""
    kind = draw(st.sampled_from(["request", "notification", "response", "error"]))
    if kind == "request":
        fields = {"id": draw(_ids), "method": draw(_text), "params": draw(_params)}
        params = msgspec.UNSET if fields["params"] is None else fields["params"]
        return kind, encode_request(fields["id"], fields["method"], params), fields
    if kind == "notification":
        fields = {"method": draw(_text), "params": draw(_params)}
        params = msgspec.UNSET if fields["params"] is None else fields["params"]
        return kind, encode_notification(fields["method"], params), fields
    if kind == "response":
        fields = {"id": draw(_ids), "result": draw(_json)}
        return kind, encode_result(fields["id"], fields["result"]), fields
    fields = {
        "id": draw(st.none() | _ids),
        "code": draw(st.integers(-(2**31), 2**31)),
        "message": draw(_text),
        "data": draw(st.just(msgspec.UNSET) | _json),
    }
    return kind, encode_error(fields["id"], fields["code"], fields["message"], fields["data"]), fields


_KIND = {"request": Request, "notification": Notification, "response": Response, "error": ErrorResponse}


def _same(raw: msgspec.Raw | None, value: Any) -> bool:
    # Compare through JSON so 1.0 and -0.0 round-trip the way JSON numbers do.
    return json.dumps(decode_raw(raw), sort_keys=True) == json.dumps(
        json.loads(json.dumps(value)), sort_keys=True
    )


@given(messages())
def test_encoded_message_decodes_to_the_same_kind_id_and_method(
    case: tuple[str, bytes, dict[str, Any]],
) -> None:
    kind, data, fields = case
    message = decode_message(data)
    assert type(message) is _KIND[kind]
    if kind in ("request", "notification"):
        assert message.method == fields["method"]
        assert (message.params is None) == (fields["params"] is None)
        if fields["params"] is not None:
            assert _same(message.params, fields["params"])
    if kind != "notification":
        assert message.id == fields["id"]
        assert type(message.id) is type(fields["id"])
    if kind == "response":
        assert _same(message.result, fields["result"])
    if kind == "error":
        assert (message.error.code, message.error.message) == (fields["code"], fields["message"])


@given(messages())
def test_batch_of_encoded_messages_decodes_element_wise(case: tuple[str, bytes, dict[str, Any]]) -> None:
    kind, data, _ = case
    elements = decode_message(b"[" + data + b"," + data + b"]", allow_batch=True)
    assert isinstance(elements, list)
    assert [type(decode_message(e)) for e in elements] == [_KIND[kind]] * 2


def _decode_or_protocol_error(data: bytes, allow_batch: bool) -> None:
    try:
        result = decode_message(data, allow_batch=allow_batch)
    except ProtocolError as exc:
        assert exc.code in (PARSE_ERROR, INVALID_REQUEST)
        assert exc.request_id is None or isinstance(exc.request_id, int | str)
        assert not isinstance(exc.request_id, bool)
        return
    if isinstance(result, list):
        assert allow_batch and result
        assert all(isinstance(e, msgspec.Raw) for e in result)
    else:
        assert isinstance(result, Request | Notification | Response | ErrorResponse)


@given(st.binary(max_size=200), st.booleans())
def test_arbitrary_bytes_give_a_message_or_a_protocol_error(data: bytes, allow_batch: bool) -> None:
    _decode_or_protocol_error(data, allow_batch)


@given(messages(), st.integers(min_value=0), st.binary(min_size=1, max_size=3), st.booleans())
def test_corrupted_messages_give_a_message_or_a_protocol_error(
    case: tuple[str, bytes, dict[str, Any]], where: int, junk: bytes, allow_batch: bool
) -> None:
    data = case[1]
    at = where % (len(data) + 1)
    _decode_or_protocol_error(data[:at] + junk + data[at + len(junk) :], allow_batch)


@given(_json, st.booleans())
def test_valid_json_is_never_a_parse_error(value: Any, allow_batch: bool) -> None:
    try:
        decode_message(json.dumps(value).encode(), allow_batch=allow_batch)
    except ProtocolError as exc:
        assert exc.code == INVALID_REQUEST


@given(
    st.dictionaries(
        st.sampled_from(["jsonrpc", "id", "method", "params", "result", "error"]),
        _json | _ids,
    ),
)
def test_envelope_shaped_objects_give_a_message_or_a_protocol_error(doc: dict[str, Any]) -> None:
    _decode_or_protocol_error(json.dumps(doc).encode(), False)
