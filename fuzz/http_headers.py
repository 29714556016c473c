"""The Streamable HTTP header rules: mirrored headers and the ``=?base64?…?=`` sentinel.

Invariants:

* :func:`decode_header_value` returns text or raises ValueError; nothing else;
* :func:`encode_header_value` writes a value a header can carry (visible ASCII, no CR/LF,
  never a false sentinel) that decodes back to the same text, for any text UTF-8 can hold;
* headers :func:`mirror_headers` builds, as the client does (``Mcp-Method``, ``Mcp-Name``,
  ``Mcp-Param-*`` from the tool's ``x-mcp-header`` properties), always pass
  :func:`validate_modern_headers`; it refuses (ValueError) only a method no header can
  carry (``Mcp-Method`` has no Base64 form), and the server refuses such a method however
  it arrives; any other headers pass or raise :class:`MCPError` with -32602 (missing
  ``_meta``) or the header-mismatch code, never anything else;
* :func:`invalid_x_mcp_headers` and :func:`header_params` take any schema without raising.

Input layout: fields = a header value, a text to encode, a JSON body ``{method, params,
schema}``, extra header lines ``name: value``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from hypothesis import strategies as st

from mcpkit.protocol import http as h
from mcpkit.protocol.errors import HEADER_MISMATCH, INVALID_PARAMS, MCPError

from ._harness import Finding, Target, corpus_of, fields, joined, json_values, timed

#: The body member Mcp-Name mirrors, by method (streamable-http "Standard Request Headers").
_TARGET_KEYS = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    "tasks/get": "taskId",
    "tasks/update": "taskId",
    "tasks/cancel": "taskId",
}
# \Z: $ would also match before a final "\n" and let "x\n" pass as header-safe.
_HEADER_SAFE = re.compile(r"^[\x20-\x7e\t]*\Z")
# RFC 9110 5.5 field value with no surrounding OWS: all Mcp-Method can carry.
_PLAIN = re.compile(r"^[\x21-\x7e](?:[\x20-\x7e\t]*[\x21-\x7e])?\Z")
_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


def _check_codec(value: str, text: str) -> None:
    try:
        h.decode_header_value(value)
    except ValueError:
        pass
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return  # a lone surrogate: no UTF-8 form, nothing a client could send
    encoded = h.encode_header_value(text)
    if not _HEADER_SAFE.match(encoded) or encoded != encoded.strip(" \t"):
        raise Finding(f"encode_header_value({text!r}) is not header-safe: {encoded!r}")
    try:
        back = h.decode_header_value(encoded)
    except ValueError as exc:
        raise Finding(f"encode_header_value({text!r}) = {encoded!r} does not decode: {exc}") from None
    if back != text:
        raise Finding(f"header round trip changed {text!r} into {back!r}")


def _check_validation(body: Any, extra: str) -> None:
    if not isinstance(body, dict):
        return
    method = body.get("method")
    params = body.get("params")
    schema = body.get("schema")
    if not isinstance(method, str) or not isinstance(params, dict):
        return
    tool_headers: dict[str, tuple[str, ...]] | None = None
    if isinstance(schema, dict) and h.invalid_x_mcp_headers(schema) is None:
        tool_headers = h.header_params(schema)
    key = _TARGET_KEYS.get(method)
    target = params.get(key) if key is not None else None
    if not isinstance(target, str):
        target = None
        if key is not None:
            return  # an invalid body: a client has nothing to mirror
    arguments = params.get("arguments")
    meta = params.get("_meta", _META)
    try:
        target.encode("utf-8") if target is not None else None
        json.dumps(arguments).encode("utf-8")
    except UnicodeEncodeError:
        return
    try:
        headers = h.mirror_headers("2026-07-28", method, params, tool_headers)
    except ValueError as exc:
        if _PLAIN.match(method):
            raise Finding(f"mirror_headers refused a header-safe method {method!r}: {exc}") from None
        # Mcp-Method has no Base64 form (streamable-http "Value Encoding") and HTTP strips
        # a value's surrounding whitespace (RFC 9110 5.5): the client refuses to send this
        # body. Whatever a careless client sends instead must be refused, never accepted.
        headers = {h.PROTOCOL_VERSION: "2026-07-28"}
        if target is not None:
            headers[h.NAME] = h.encode_header_value(target)
        for sent in (method, method.strip(" \t")):
            try:
                h.validate_modern_headers(
                    {**headers, h.METHOD: sent}, method, _META, target, arguments, tool_headers
                )
            except MCPError as refused:
                if refused.code != HEADER_MISMATCH:
                    raise Finding(f"method {method!r} refused with {refused.code}") from None
            else:
                raise Finding(f"body method {method!r} accepted with Mcp-Method {sent!r}")
        headers[h.METHOD] = method
    else:
        if meta is _META:
            try:
                h.validate_modern_headers(headers, method, meta, target, arguments, tool_headers)
            except MCPError as exc:
                raise Finding(
                    f"headers mirrored from the body were refused: {exc.message}; {headers!r} {body!r}"
                ) from None
    for line in extra.splitlines():
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value
    try:
        h.validate_modern_headers(headers, method, meta, target, arguments, tool_headers)
    except MCPError as exc:
        if exc.code not in (INVALID_PARAMS, HEADER_MISMATCH):
            raise Finding(f"header validation answered {exc.code}: {exc.message}") from None


def one_input(data: bytes) -> None:
    value, text, body, extra = fields(data, 4)
    _check_codec(value, text)
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError):
        return
    _check_validation(doc, extra)


_names = st.sampled_from(["tools/call", "prompts/get", "resources/read", "tasks/get", "tools/list", "ping"])
_schemas = st.fixed_dictionaries(
    {"type": st.just("object")},
    optional={
        "properties": st.dictionaries(
            st.sampled_from(["region", "n", "flag", "deep"]),
            st.one_of(
                st.fixed_dictionaries(
                    {"type": st.sampled_from(["string", "integer", "boolean", "object", "number"])},
                    optional={
                        "x-mcp-header": st.one_of(
                            st.sampled_from(["Region", "N", "Flag", "bad name", ""]), json_values
                        )
                    },
                ),
                json_values,
            ),
            max_size=3,
        )
    },
)
_bodies = st.fixed_dictionaries(
    {
        "method": _names,
        "params": st.fixed_dictionaries(
            {},
            optional={
                "name": st.one_of(st.text(max_size=12), json_values),
                "uri": st.text(max_size=12),
                "taskId": st.text(max_size=6),
                "arguments": st.dictionaries(
                    st.sampled_from(["region", "n", "flag", "deep"]), json_values, max_size=4
                ),
            },
        ),
        "schema": _schemas,
    }
).map(lambda d: json.dumps(d))
_values = st.one_of(
    st.text(max_size=20),
    st.builds(
        lambda s: "=?base64?" + s + "?=",
        st.text("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=", max_size=16),
    ),
)
_extra = st.lists(
    st.builds(
        lambda n, v: f"{n}: {v}",
        st.sampled_from(["mcp-name", "mcp-method", "mcp-param-region", "mcp-protocol-version"]),
        _values,
    ),
    max_size=3,
).map("\n".join)
strategy: st.SearchStrategy[bytes] = st.one_of(
    st.builds(joined, _values, st.text(max_size=30), _bodies, _extra),
    st.sampled_from(corpus_of("http_headers") or [b"=?base64?aGk=?="]),
)

TARGET = Target("http_headers", timed(one_input), strategy, ("mcpkit.protocol.http",))
