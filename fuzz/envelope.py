"""The JSON-RPC envelope and the second decoding phase, for every method.

Invariants, for any bytes, with and without batches allowed:

* :func:`decode_message` returns a message (or a batch's raw elements) or raises
  :class:`ProtocolError` with -32700 (bad JSON) or -32600 (not a valid envelope); nothing else.
* A JSON document that Python's own parser reads is never a parse error, and one that is a
  well-formed request (an object, ``"jsonrpc": "2.0"``, a string ``method``, an integer or string
  ``id``, object ``params``) is a :class:`Request` under that id: the lone-surrogate bug was
  the first break of this rule.
* An error carries the id whenever the id member could be read.
* The second phase (:func:`decode_request`) never raises: a method it does not know is -32601,
  params of the wrong shape -32602, for each method the server serves; every typed result and
  server-to-client params decoder raises only :class:`msgspec.ValidationError`/``DecodeError``.
* An answer built for a decoded request encodes and decodes back to the same id.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec
from hypothesis import strategies as st

from mcpkit.protocol import jsonrpc
from mcpkit.protocol import types as t
from mcpkit.protocol.errors import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    ProtocolError,
)
from mcpkit.protocol.jsonrpc import Request, decode_message
from mcpkit.protocol.requests import SERVER_METHODS, decode_request

from ._harness import Finding, Target, corpus_of, json_values, timed

#: Results and server-to-client params a client decodes in its second phase.
_CLIENT_TYPES: list[msgspec.json.Decoder[Any]] = [
    msgspec.json.Decoder(tp)
    for tp in (
        t.InitializeResult,
        t.DiscoverResult,
        t.ListToolsResult,
        t.CallToolResult,
        t.ListResourcesResult,
        t.ListResourceTemplatesResult,
        t.ReadResourceResult,
        t.ListPromptsResult,
        t.GetPromptResult,
        t.CompleteResult,
        t.InputRequiredResult,
        t.CreateMessageParams,
        t.ElicitParams,
        t.CreateMessageResult,
        t.ElicitResult,
        t.ListRootsResult,
        t.ProgressParams,
        t.LoggingMessageParams,
        t.CancelledParams,
    )
]
_METHODS = sorted(SERVER_METHODS)


def _python_view(data: bytes) -> Any:
    """What Python's json module reads (lone surrogates replaced as mcpkit does), or _BAD."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return _BAD
    try:
        value = json.loads(text, parse_constant=_not_json)
    except (ValueError, RecursionError):
        return _BAD
    return _replace(value)


_BAD = object()


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON (RFC 8259 section 6)")


def _replace(value: Any) -> Any:
    if isinstance(value, str):
        return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    if isinstance(value, list):
        return [_replace(v) for v in value]
    if isinstance(value, dict):
        return {_replace(k): _replace(v) for k, v in value.items()}
    return value


def _is_id(value: Any) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool)) or isinstance(value, str)


def _well_formed_request(doc: Any) -> bool:
    return (
        isinstance(doc, dict)
        and doc.get("jsonrpc") == "2.0"
        and isinstance(doc.get("method"), str)
        and _is_id(doc.get("id"))
        and isinstance(doc.get("params", {}), dict)
        and "result" not in doc
        and "error" not in doc
    )


def _depth(data: bytes) -> int:
    return max(data.count(b"["), data.count(b"{"))


def _second_phase(message: Request) -> None:
    request = decode_request(message)
    if request.id != message.id or request.method != message.method:
        raise Finding(f"decode_request changed the id or method: {message!r} -> {request!r}")
    error = request.error
    if error is not None:
        if message.method not in SERVER_METHODS and error.code != METHOD_NOT_FOUND:
            raise Finding(f"unknown method {message.method!r} answered {error.code}, not -32601")
        if message.method in SERVER_METHODS and error.code not in (INVALID_PARAMS, PARSE_ERROR):
            raise Finding(f"bad params of {message.method!r} answered {error.code}, not -32602")
    answer = jsonrpc.encode_result(message.id, {"ok": True})
    back = decode_message(answer)
    if not isinstance(back, jsonrpc.Response) or back.id != message.id:
        raise Finding(f"the answer to id {message.id!r} does not read back: {answer!r}")


def _check(data: bytes, allow_batch: bool) -> None:
    try:
        message = decode_message(data, allow_batch=allow_batch)
    except ProtocolError as exc:
        if exc.code not in (PARSE_ERROR, INVALID_REQUEST):
            raise Finding(f"envelope error {exc.code} for {data[:200]!r}") from None
        if exc.request_id is not None and not _is_id(exc.request_id):
            raise Finding(f"error carries a bad id {exc.request_id!r}") from None
        doc = _python_view(data)
        if exc.code == PARSE_ERROR and doc is not _BAD and _depth(data) < 200:
            raise Finding(f"valid JSON answered -32700: {data[:200]!r} ({exc.message})") from None
        if _well_formed_request(doc) and _depth(data) < 200:
            raise Finding(f"a well-formed request was refused: {data[:200]!r} ({exc.message})") from None
        if isinstance(doc, dict) and _is_id(doc.get("id")) and exc.request_id != doc["id"]:
            raise Finding(f"error lost the readable id {doc['id']!r}: {exc.message}") from None
        return
    if isinstance(message, list):
        if not allow_batch:
            raise Finding("a batch was returned although batches are not allowed")
        for element in message:
            _check(bytes(element), allow_batch=False)
        return
    if isinstance(message, Request):
        doc = _python_view(data)
        if isinstance(doc, dict) and doc.get("id") != message.id:
            raise Finding(f"request id read as {message.id!r}, JSON says {doc.get('id')!r}")
        _second_phase(message)
    elif isinstance(message, jsonrpc.Response):
        for decoder in _CLIENT_TYPES:
            try:
                decoder.decode(message.result)
            except msgspec.DecodeError:
                pass


def one_input(data: bytes) -> None:
    _check(data, allow_batch=False)
    _check(data, allow_batch=True)


_ids = st.one_of(
    st.integers(-(2**70), 2**70), st.text(max_size=10), st.none(), st.booleans(), st.floats(), st.just([])
)


@st.composite
def _envelopes(draw: st.DrawFn) -> bytes:
    doc: dict[str, Any] = {}
    if draw(st.integers(0, 9)):
        doc["jsonrpc"] = draw(st.sampled_from(["2.0", "2.0", "2.0", "1.0", 2.0]))
    if draw(st.integers(0, 5)):
        doc["id"] = draw(_ids)
    kind = draw(st.integers(0, 5))
    if kind <= 3:
        doc["method"] = draw(st.one_of(st.sampled_from(_METHODS), st.text(max_size=12), json_values))
        if draw(st.booleans()):
            doc["params"] = draw(
                st.one_of(st.dictionaries(st.sampled_from(_PARAM_KEYS), json_values, max_size=5), json_values)
            )
    elif kind == 4:
        doc["result"] = draw(st.dictionaries(st.sampled_from(_PARAM_KEYS), json_values, max_size=5))
    else:
        doc["error"] = draw(
            st.one_of(st.fixed_dictionaries({"code": st.integers(), "message": st.text()}), json_values)
        )
    text = json.dumps(doc, ensure_ascii=draw(st.booleans()))
    data = text.encode("utf-8", "surrogatepass")
    if draw(st.integers(0, 7)) == 0:
        data = b"[" + b",".join([data] * draw(st.integers(0, 3))) + b"]"
    return data


_PARAM_KEYS = [
    "name", "arguments", "uri", "cursor", "_meta", "protocolVersion", "capabilities", "clientInfo",
    "ref", "argument", "level", "taskId", "content", "tools", "contents", "messages", "requestState",
]  # fmt: skip

_seeds = corpus_of("envelope")
strategy: st.SearchStrategy[bytes] = st.one_of(
    _envelopes(),
    st.binary(max_size=200),
    st.sampled_from(_seeds) if _seeds else st.nothing(),
)

TARGET = Target(
    "envelope", timed(one_input), strategy, ("mcpkit.protocol.jsonrpc", "mcpkit.protocol.requests")
)
