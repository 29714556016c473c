"""The JSON-RPC 2.0 envelope: classify bytes into messages, and build replies.

Decoding is the first of two phases: the envelope is read here and ``params`` /
``result`` stay as :class:`msgspec.Raw` slices of the input, decoded later by
method and revision (by the server's and client's dispatchers) only when needed.
"""

from __future__ import annotations

import codecs
import re
from typing import Any, TypeAlias

import msgspec
from msgspec import UNSET, Raw, UnsetType

from .errors import INVALID_REQUEST, PARSE_ERROR, ProtocolError

__all__ = [
    "JSONRPC_VERSION",
    "ErrorObject",
    "ErrorResponse",
    "Message",
    "Notification",
    "Request",
    "RequestId",
    "Response",
    "decode_message",
    "decode_raw",
    "encode",
    "encode_error",
    "encode_notification",
    "encode_request",
    "encode_result",
    "replace_lone_surrogates",
]

JSONRPC_VERSION = "2.0"
RequestId: TypeAlias = "int | str"


class ErrorObject(msgspec.Struct):
    """The ``error`` member of an error response."""

    code: int
    message: str
    data: Any | UnsetType = UNSET


class Request(msgspec.Struct):
    """An inbound request; ``params`` is undecoded (None when absent)."""

    id: int | str
    method: str
    params: Raw | None = None


class Notification(msgspec.Struct):
    """An inbound notification; ``params`` is undecoded (None when absent)."""

    method: str
    params: Raw | None = None


class Response(msgspec.Struct):
    """An inbound successful response; ``result`` is undecoded."""

    id: int | str
    result: Raw


class ErrorResponse(msgspec.Struct):
    """An inbound error response. ``id`` is None when the peer could not read ours."""

    id: int | str | None
    error: ErrorObject


Message: TypeAlias = Request | Notification | Response | ErrorResponse


class _Envelope(msgspec.Struct):
    jsonrpc: Any = UNSET
    id: Any = UNSET
    method: Any = UNSET
    params: Raw | UnsetType = UNSET
    result: Raw | UnsetType = UNSET
    error: Raw | UnsetType = UNSET


_envelope_or_batch = msgspec.json.Decoder(_Envelope | list[Raw])
_envelope = msgspec.json.Decoder(_Envelope)
_error_object = msgspec.json.Decoder(ErrorObject)
_any = msgspec.json.Decoder()


def decode_message(data: bytes | Raw, *, allow_batch: bool = False) -> Message | list[Raw]:
    """Classify one JSON-RPC message.

    Returns a list of raw elements when ``data`` is a JSON array and
    ``allow_batch`` is true (2025-03-26 batches; each element is then decoded
    with this function again). Raises :class:`ProtocolError` with -32700 for bad
    JSON and -32600 for a well-formed but invalid envelope, carrying the id when
    it could be read.
    """
    try:
        env = (_envelope_or_batch if allow_batch else _envelope).decode(data)
    except msgspec.ValidationError as exc:
        # The only validation the envelope does is "is it an object (or array)".
        raise ProtocolError(INVALID_REQUEST, f"Invalid Request: {exc}") from None
    except msgspec.DecodeError as exc:
        repaired = replace_lone_surrogates(data)
        if repaired is not None:
            # Valid JSON (RFC 8259's grammar allows unpaired surrogate escapes, section 8.2)
            # that msgspec refuses: read it with U+FFFD in their place, so the request is
            # answered under its own id, not -32700 with a null id (docs/security.md).
            return decode_message(repaired, allow_batch=allow_batch)
        raise ProtocolError(PARSE_ERROR, f"Parse error: {exc}") from None
    except RecursionError:
        raise ProtocolError(PARSE_ERROR, "Parse error: JSON nested too deeply") from None
    if isinstance(env, list):
        if not env:
            raise ProtocolError(INVALID_REQUEST, "Invalid Request: empty batch")
        return env
    if data.__class__ is not bytes or not data.isascii():
        _check_utf8(data, env)
    # The common case, a well-formed request, without the general checks' calls
    # (_classify gives the same answer for it, and the error for everything else).
    rid = env.id
    method = env.method
    if (
        method.__class__ is str
        and (rid.__class__ is int or rid.__class__ is str)
        and env.jsonrpc == JSONRPC_VERSION
        and env.result is UNSET
        and env.error is UNSET
    ):
        params = env.params
        if params is UNSET:
            return Request(rid, method, None)
        if memoryview(params)[0] == _OPEN_BRACE:
            return Request(rid, method, params)
    elif (
        method is UNSET
        and (rid.__class__ is int or rid.__class__ is str)
        and env.jsonrpc == JSONRPC_VERSION
        and env.error is UNSET
        and env.params is UNSET
    ):
        result = env.result
        if result is not UNSET:
            return Response(rid, result)  # (a well-formed result: what _classify makes of it)
    return _classify(env)


#: A backslash escape: a surrogate pair, a lone high or low surrogate, or any other escape,
#: each consumed whole so that an escaped backslash followed by "u" is never read as one.
_ESCAPE = re.compile(
    rb"\\(?:(u[dD][89abAB][0-9a-fA-F]{2})(\\u[dD][c-fC-F][0-9a-fA-F]{2})?|(u[dD][c-fC-F][0-9a-fA-F]{2})|.)",
    re.DOTALL,
)
_LONE_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]")
_REPLACEMENT = b"\\ufffd"


def replace_lone_surrogates(data: bytes | Raw) -> bytes | None:
    """``data`` with each unpaired surrogate escape (``\\ud800``) replaced by ``\\ufffd``.

    JavaScript's ``JSON.stringify`` emits such escapes for a string cut inside a
    surrogate pair (an emoji split by truncation); msgspec, like UTF-8 itself,
    cannot represent them. Returns None when there is nothing to replace (the
    input is bad for another reason). Only called once decoding failed: the
    common path pays nothing.
    """
    raw = bytes(memoryview(data))
    if _LONE_SURROGATE.search(raw) is None:
        return None
    replaced = False

    def repair(match: re.Match[bytes]) -> bytes:
        nonlocal replaced
        high, low, lone_low = match.groups()
        if (high is not None and low is None) or lone_low is not None:
            replaced = True  # half a pair: a high surrogate alone, or a low one without its high
            return _REPLACEMENT
        return match.group(0)

    fixed = _ESCAPE.sub(repair, raw)
    return fixed if replaced else None


def _check_utf8(data: bytes | Raw, env: _Envelope) -> None:
    """Members kept as Raw were skipped, not validated: check the encoding once."""
    if isinstance(data, bytes) and data.isascii():
        return
    try:
        codecs.utf_8_decode(memoryview(data), "strict", True)
    except UnicodeDecodeError:
        rid = env.id if _valid_id(env.id) else None
        raise ProtocolError(PARSE_ERROR, "Parse error: invalid UTF-8", rid) from None


_OPEN_BRACE = ord("{")


def _valid_id(value: Any) -> bool:
    # MCP forbids null ids on requests (basic/index "Requests"); bool is an int subclass.
    return (isinstance(value, int) and not isinstance(value, bool)) or isinstance(value, str)


def _classify(env: _Envelope) -> Message:
    rid = env.id if _valid_id(env.id) else None
    if env.jsonrpc != JSONRPC_VERSION:
        raise ProtocolError(INVALID_REQUEST, 'Invalid Request: "jsonrpc" must be "2.0"', rid)
    if env.method is not UNSET:
        if not isinstance(env.method, str) or env.result is not UNSET or env.error is not UNSET:
            raise ProtocolError(INVALID_REQUEST, "Invalid Request: malformed method call", rid)
        params = None if env.params is UNSET else env.params
        if params is not None and memoryview(params)[0] != _OPEN_BRACE:
            # MCP params are always objects (JSON-RPC 2.0 would also allow arrays).
            raise ProtocolError(INVALID_REQUEST, 'Invalid Request: "params" must be an object', rid)
        if env.id is UNSET:
            return Notification(env.method, params)
        if rid is None:
            raise ProtocolError(INVALID_REQUEST, "Invalid Request: id must be a string or an integer")
        return Request(rid, env.method, params)
    if not isinstance(env.result, UnsetType) and env.error is UNSET and rid is not None:
        return Response(rid, env.result)
    if not isinstance(env.error, UnsetType) and env.result is UNSET and (rid is not None or env.id is None):
        try:
            return ErrorResponse(rid, _error_object.decode(env.error))
        except msgspec.DecodeError:
            raise ProtocolError(INVALID_REQUEST, "Invalid Request: malformed error object", rid) from None
    raise ProtocolError(INVALID_REQUEST, "Invalid Request: not a request, notification or response", rid)


def decode_raw(raw: Raw | None) -> Any:
    """Decode an undecoded member to plain Python values (None stays None)."""
    return None if raw is None else _any.decode(raw)


_encoder = msgspec.json.Encoder()


class _OutRequest(msgspec.Struct):
    jsonrpc: str
    id: int | str
    method: str
    params: Any | UnsetType = UNSET


class _OutNotification(msgspec.Struct):
    jsonrpc: str
    method: str
    params: Any | UnsetType = UNSET


class _OutResult(msgspec.Struct):
    jsonrpc: str
    id: int | str
    result: Any


class _OutError(msgspec.Struct):
    jsonrpc: str
    id: int | str | None
    error: ErrorObject


def encode(obj: Any) -> bytes:
    """Encode any wire value (Structs, dicts, lists) as compact JSON."""
    return _encoder.encode(obj)


def encode_request(request_id: int | str, method: str, params: Any = UNSET) -> bytes:
    return _encoder.encode(_OutRequest(JSONRPC_VERSION, request_id, method, params))


def encode_notification(method: str, params: Any = UNSET) -> bytes:
    return _encoder.encode(_OutNotification(JSONRPC_VERSION, method, params))


def encode_result(request_id: int | str, result: Any) -> bytes:
    return _encoder.encode(_OutResult(JSONRPC_VERSION, request_id, result))


def encode_error(request_id: int | str | None, code: int, message: str, data: Any = UNSET) -> bytes:
    return _encoder.encode(_OutError(JSONRPC_VERSION, request_id, ErrorObject(code, message, data)))
