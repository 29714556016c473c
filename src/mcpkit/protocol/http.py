"""Streamable HTTP decisions, without I/O: header rules, value encoding, status
codes, and the Host/Origin policy (2026-07-28 basic/transports/streamable-http;
2025-11-25 basic/transports).

Header names here are lower-case, as ASGI delivers them.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any, Final
from urllib.parse import urlsplit

from .errors import (
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    MISSING_CLIENT_CAPABILITY,
    PARSE_ERROR,
    RATE_LIMITED,
    UNSUPPORTED_PROTOCOL_VERSION,
    MCPError,
)

__all__ = [
    "LOOPBACK_HOSTS",
    "OriginPolicy",
    "decode_header_value",
    "encode_header_value",
    "error_headers",
    "header_params",
    "invalid_x_mcp_headers",
    "mirror_headers",
    "status_for_error",
    "validate_modern_headers",
]

PROTOCOL_VERSION: Final = "mcp-protocol-version"
SESSION_ID: Final = "mcp-session-id"
METHOD: Final = "mcp-method"
NAME: Final = "mcp-name"
PARAM_PREFIX: Final = "mcp-param-"
LAST_EVENT_ID: Final = "last-event-id"

# \Z, not $: $ also matches before a final "\n", which let "x\n" pass as a plain
# value (sent raw instead of Base64) and "Region\n" as a header name.
_SENTINEL = re.compile(r"^=\?base64\?(.*)\?=\Z", re.DOTALL)
# RFC 9110 field values: visible ASCII, space and tab; leading/trailing space not kept.
_PLAIN = re.compile(r"^[\x21-\x7e](?:[\x20-\x7e\t]*[\x21-\x7e])?\Z")
_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+\Z")
_BASE64 = re.compile(r"^[A-Za-z0-9+/]*={0,2}\Z")
_SAFE_INT = 2**53 - 1
#: RFC 9110 5.5: what a recipient strips around a field value (OWS: space and tab only).
#: str.strip() would also drop \x1c-\x1f, \x85 and \xa0, which an HTTP parser delivers
#: (h11 takes them as obs-text), making "tools/call\x85" pass for "tools/call".
_OWS = " \t"


def decode_header_value(value: str) -> str:
    """The value a mirrored header carries, decoding the ``=?base64?…?=`` sentinel.

    Raises ValueError for characters a header may not hold or a malformed sentinel.
    """
    match = _SENTINEL.match(value)
    if match is None:
        if value and not _PLAIN.match(value):
            raise ValueError("invalid characters in header value")
        return value
    encoded = match.group(1)
    if len(encoded) % 4 or not _BASE64.match(encoded):
        raise ValueError("malformed base64 in header value")
    try:
        return base64.b64decode(encoded, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        raise ValueError("malformed base64 in header value") from None


def encode_header_value(value: str) -> str:
    """A header-safe form of ``value``: itself when plain ASCII, else the sentinel."""
    if (value == "" or _PLAIN.match(value)) and not _SENTINEL.match(value):
        return value
    return "=?base64?" + base64.b64encode(value.encode("utf-8")).decode("ascii") + "?="


def mirror_headers(
    version: str,
    method: str,
    params: Mapping[str, Any],
    tool_headers: Mapping[str, tuple[str, ...]] | None = None,
) -> dict[str, str]:
    """The headers a 2026-07-28 POST mirrors from its body (streamable-http "Standard
    Request Headers" and "Client Behavior"): ``MCP-Protocol-Version``, ``Mcp-Method``,
    ``Mcp-Name`` and, for ``tools/call``, the ``Mcp-Param-*`` of ``tool_headers``
    (from :func:`header_params` on the tool's input schema).

    Raises ValueError when the body cannot be mirrored, so a client refuses to send it
    rather than send what the server must refuse: ``Mcp-Method`` and
    ``MCP-Protocol-Version`` have no Base64 form (streamable-http "Value Encoding"
    covers ``Mcp-Name`` and ``Mcp-Param-*`` only), so a method or version that is
    empty, non-ASCII, holds control characters, or has surrounding whitespace (which
    HTTP strips, RFC 9110 5.5) cannot be carried; nor can a lone surrogate anywhere.
    """
    for header, value in ((PROTOCOL_VERSION, version), (METHOD, method)):
        if not _PLAIN.match(value):
            raise ValueError(f"{value!r} cannot be sent as the {header} header (RFC 9110 field value)")
    headers = {PROTOCOL_VERSION: version, METHOD: method}
    key = NAME_SOURCES.get(method)
    target = params.get(key) if key is not None else None
    if isinstance(target, str):
        headers[NAME] = encode_header_value(target)
    if method == "tools/call" and tool_headers:
        arguments = params.get("arguments")
        for name, path in tool_headers.items():
            text = header_text(_at(arguments, path))
            if text is not None:
                headers[PARAM_PREFIX + name] = encode_header_value(text)
    return headers


def header_text(value: Any) -> str | None:
    """How a primitive argument is written in a header (None: no header)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | str):
        return str(value)
    return None


def header_params(input_schema: Mapping[str, Any]) -> dict[str, tuple[str, ...]]:
    """``x-mcp-header`` names (lower-case) to the property path they mirror.

    Only properties reachable through ``properties`` chains count; call
    :func:`invalid_x_mcp_headers` first to refuse schemas that break the rules.
    """
    out: dict[str, tuple[str, ...]] = {}

    def walk(schema: Mapping[str, Any], path: tuple[str, ...]) -> None:
        props = schema.get("properties")
        if not isinstance(props, Mapping):
            return
        for key, sub in props.items():
            if not isinstance(sub, Mapping):
                continue
            name = sub.get("x-mcp-header")
            if isinstance(name, str):
                out[name.lower()] = (*path, key)
            walk(sub, (*path, key))

    walk(input_schema, ())
    return out


def invalid_x_mcp_headers(input_schema: Mapping[str, Any]) -> str | None:
    """Why a tool's ``x-mcp-header`` annotations are invalid, or None when they are fine."""
    seen: set[str] = set()
    reachable: set[int] = set()

    def mark(schema: Mapping[str, Any]) -> None:
        props = schema.get("properties")
        if isinstance(props, Mapping):
            for sub in props.values():
                if isinstance(sub, Mapping):
                    reachable.add(id(sub))
                    mark(sub)

    mark(input_schema)

    def check(node: Any) -> str | None:
        if isinstance(node, Mapping):
            if "x-mcp-header" in node:
                problem = _header_problem(node, seen, id(node) in reachable)
                if problem:
                    return problem
            for value in node.values():
                problem = check(value)
                if problem:
                    return problem
        elif isinstance(node, list):
            for item in node:
                problem = check(item)
                if problem:
                    return problem
        return None

    return check(input_schema)


def _header_problem(node: Mapping[str, Any], seen: set[str], reachable: bool) -> str | None:
    name = node["x-mcp-header"]
    if not isinstance(name, str) or not name or not _TOKEN.match(name):
        return f"x-mcp-header {name!r} is not a valid header name"
    if not reachable:
        return f"x-mcp-header {name!r} is not reachable through properties alone"
    if node.get("type") not in ("string", "integer", "boolean"):
        return f"x-mcp-header {name!r} is on a {node.get('type')!r} property (string, integer, boolean only)"
    if name.lower() in seen:
        return f"x-mcp-header {name!r} is used twice"
    seen.add(name.lower())
    return None


def _at(arguments: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(arguments, Mapping) or key not in arguments:
            return None
        arguments = arguments[key]
    return arguments


#: The body param ``Mcp-Name`` mirrors, by method (streamable-http "Standard Request
#: Headers"); tasks/* carry the task id, so intermediaries can route them to the
#: instance holding the task (SEP-2663 "Streamable HTTP: Routing Headers").
NAME_SOURCES: Final[Mapping[str, str]] = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    "tasks/get": "taskId",
    "tasks/update": "taskId",
    "tasks/cancel": "taskId",
}


def validate_modern_headers(
    headers: Mapping[str, str],
    method: str,
    meta: Mapping[str, Any] | None,
    target: str | None,
    arguments: Any = None,
    tool_headers: Mapping[str, tuple[str, ...]] | None = None,
) -> None:
    """Check a modern POST's mirrored headers against its body (streamable-http
    "Server Validation"); raises the MCPError to answer with.

    ``meta`` is the body's ``params._meta``, ``target`` its tool or prompt name
    or resource URI, ``arguments`` its tool arguments. The order matters to
    clients: required ``_meta`` keys first (-32602), then header/body agreement
    (-32020); the version itself is judged afterwards.
    """
    if not isinstance(meta, Mapping) or "io.modelcontextprotocol/protocolVersion" not in meta:
        raise MCPError(INVALID_PARAMS, 'Missing "_meta.io.modelcontextprotocol/protocolVersion"')
    if not isinstance(meta.get("io.modelcontextprotocol/clientCapabilities"), Mapping):
        raise MCPError(INVALID_PARAMS, 'Missing "_meta.io.modelcontextprotocol/clientCapabilities"')
    version = headers.get(PROTOCOL_VERSION)
    if version is None:
        raise _mismatch("the MCP-Protocol-Version header is required")
    if version.strip(_OWS) != meta["io.modelcontextprotocol/protocolVersion"]:
        raise _mismatch("MCP-Protocol-Version header does not match _meta protocolVersion")
    sent_method = headers.get(METHOD)
    if sent_method is None:
        raise _mismatch("the Mcp-Method header is required")
    sent_method = sent_method.strip(_OWS)
    if not _PLAIN.match(sent_method):
        # streamable-http "Server Validation": a header value with invalid characters fails.
        raise _mismatch(f"Mcp-Method header {sent_method!r} holds invalid characters")
    if sent_method != method:
        if not _PLAIN.match(method):
            # No header can carry this method (no Base64 form for Mcp-Method; HTTP
            # strips surrounding whitespace, RFC 9110 5.5): say so, not just "differs".
            raise _mismatch(f"body method {method!r} cannot be carried in the Mcp-Method header")
        raise _mismatch(f"Mcp-Method header {sent_method!r} does not match body method {method!r}")
    if method in NAME_SOURCES:
        sent_name = headers.get(NAME)
        if sent_name is None:
            raise _mismatch("the Mcp-Name header is required for " + method)
        try:
            name = decode_header_value(sent_name.strip(_OWS))
        except ValueError as exc:
            raise _mismatch(f"Mcp-Name header: {exc}") from None
        if name != target:
            raise _mismatch("Mcp-Name header does not match the body")
    if method == "tools/call" and tool_headers:
        _validate_params(headers, arguments, tool_headers)


def _validate_params(
    headers: Mapping[str, str], arguments: Any, tool_headers: Mapping[str, tuple[str, ...]]
) -> None:
    for name, path in tool_headers.items():
        sent = headers.get(PARAM_PREFIX + name)
        expected = header_text(_at(arguments, path))
        if sent is None:
            if expected is not None:
                raise _mismatch(f"the Mcp-Param-{name} header is required (its argument is present)")
            continue
        try:
            value = decode_header_value(sent.strip(_OWS))
        except ValueError as exc:
            raise _mismatch(f"Mcp-Param-{name} header: {exc}") from None
        if expected is None or not _same(value, expected, _at(arguments, path)):
            raise _mismatch(f"Mcp-Param-{name} header does not match the body")


def _same(header: str, expected: str, body: Any) -> bool:
    if header == expected:
        return True
    if isinstance(body, int) and not isinstance(body, bool):
        # streamable-http: integers SHOULD be compared numerically ("42.0" == 42).
        try:
            return float(header) == body and abs(body) <= _SAFE_INT
        except ValueError:
            return False
    return False


def _mismatch(message: str) -> MCPError:
    return MCPError(HEADER_MISMATCH, f"Header mismatch: {message}")


def status_for_error(code: int, *, modern: bool, data: Any = None) -> int:
    """The HTTP status that goes with a JSON-RPC error answer."""
    if code in (PARSE_ERROR, INVALID_REQUEST):
        return 400
    if code == RATE_LIMITED:
        return 429  # RFC 6585: with Retry-After (error_headers), in either era
    if code == INTERNAL_ERROR and _retry_after(data) is not None:
        # An internal error that says when to come back is an outage (Redis down):
        # 503 with Retry-After (RFC 9110 15.6.4) lets a load balancer or client wait.
        return 503
    if not modern:
        return 200 if code != INTERNAL_ERROR else 500
    if code == METHOD_NOT_FOUND:
        return 404
    if code in (INVALID_PARAMS, HEADER_MISMATCH, MISSING_CLIENT_CAPABILITY, UNSUPPORTED_PROTOCOL_VERSION):
        return 400
    if code == INTERNAL_ERROR:
        return 500
    return 200


def error_headers(code: int, data: Any) -> list[tuple[bytes, bytes]]:
    """Response headers that go with a JSON-RPC error answer: ``Retry-After`` for a
    rate-limited request or a passing outage (``data.retryAfter`` seconds, rounded up)."""
    retry = _retry_after(data) if code in (RATE_LIMITED, INTERNAL_ERROR) else None
    return [] if retry is None else [(b"retry-after", str(math.ceil(retry)).encode())]


def _retry_after(data: Any) -> float | None:
    retry = data.get("retryAfter") if isinstance(data, Mapping) else None
    if isinstance(retry, int | float) and not isinstance(retry, bool) and retry >= 0:
        return float(retry)
    return None


LOOPBACK_HOSTS: Final = ("localhost", "127.0.0.1", "[::1]", "::1")


class OriginPolicy:
    """Which ``Host`` and ``Origin`` values a server accepts (DNS-rebinding defence).

    ``allowed_hosts`` are host names (any port) or ``host:port``;
    ``allowed_origins`` are ``scheme://host[:port]`` or bare host names (any
    scheme and port). With ``None``, a loopback bind allows loopback names only
    and any other bind allows any Host; Origins must always match an allowed host.
    """

    def __init__(
        self,
        bind_host: str = "127.0.0.1",
        allowed_hosts: Iterable[str] | None = None,
        allowed_origins: Iterable[str] | None = None,
    ) -> None:
        self.any_host = allowed_hosts is None and not _is_loopback(bind_host)
        self.hosts = {h.lower() for h in (allowed_hosts if allowed_hosts is not None else LOOPBACK_HOSTS)}
        self.origins = {o.lower().rstrip("/") for o in (allowed_origins or ())}

    def host_allowed(self, host: str | None) -> bool:
        if self.any_host:
            return True
        if not host:
            return False
        host = host.lower()
        if host in self.hosts:
            return True
        name, port = _split_host(host)
        return name in self.hosts and (port is None or port.isdigit())

    def origin_allowed(self, origin: str | None, host: str | None = None) -> bool:
        """An absent Origin (not a browser) is fine; a present one must be allowed:
        listed, naming an allowed host, or (when any Host is accepted) the same
        origin as the request's Host."""
        if origin is None:
            return True
        origin = origin.lower().rstrip("/")
        if origin in self.origins:
            return True
        parts = urlsplit(origin)
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.path or parts.query:
            return False
        if self.any_host:
            return host is not None and parts.netloc == host.lower()
        return self.host_allowed(parts.netloc)


def _split_host(host: str) -> tuple[str, str | None]:
    if host.startswith("["):
        end = host.find("]")
        if end < 0:
            return host, None
        rest = host[end + 1 :]
        return host[: end + 1], rest[1:] if rest.startswith(":") else None
    name, sep, port = host.rpartition(":")
    return (name, port) if sep else (host, None)


def _is_loopback(host: str) -> bool:
    if host in ("localhost",):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
