"""Calling the API: a tool's arguments become one HTTP request; its response becomes the result."""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any
from urllib.parse import quote

import httpx
from msgspec import UNSET

from ...protocol import _binary as binary
from ...protocol import types as t
from ...protocol.auth import Principal
from ._operations import Argument, Operation

__all__ = ["Backend", "HeadersFor", "Request", "build_request", "tool_result"]

#: Headers for one call from the MCP caller's principal (None when unauthenticated):
#: the place to map a caller to the API's own credentials.
HeadersFor = Callable[[Principal | None], Mapping[str, str] | Awaitable[Mapping[str, str]]]


class CallFailed(Exception):
    """The API could not be called or its answer could not be used (the message says why)."""


class Request:
    """What :func:`build_request` decided: method, path, query, headers, cookies and body."""

    __slots__ = ("content", "cookies", "data", "headers", "json", "method", "path", "query")

    def __init__(self, method: str, path: str) -> None:
        self.method = method
        self.path = path
        self.query: list[tuple[str, str | int | float | bool | None]] = []
        self.headers: dict[str, str] = {}
        self.cookies: dict[str, str] = {}
        self.json: Any = None
        self.data: dict[str, str] | None = None
        self.content: str | None = None


def build_request(op: Operation, arguments: Mapping[str, Any]) -> Request:
    """The HTTP request for ``arguments``; :class:`ValueError` names a missing or unknown one."""
    unknown = sorted(set(arguments) - op.known)
    if unknown:
        raise ValueError(f"unknown argument(s) {', '.join(map(repr, unknown))}; expected {sorted(op.known)}")
    missing = [a.prop for a in op.arguments if a.required and arguments.get(a.prop) is None]
    if missing:
        raise ValueError(f"missing required argument(s) {', '.join(map(repr, missing))}")
    request = Request(op.method.upper(), op.path)
    body: dict[str, Any] = {}
    for arg in op.arguments:
        value = arguments.get(arg.prop)
        if value is None:
            continue
        if arg.location == "path":
            request.path = request.path.replace("{" + arg.name + "}", _segment(_scalar(value, ",")))
        elif arg.location == "query":
            request.query.extend(_query(arg, value))
        elif arg.location == "header":
            request.headers[arg.name] = _header_value(_scalar(value, ","))
        elif arg.location == "cookie":
            request.cookies[arg.name] = _scalar(value, ",")
        elif op.body is not None and op.body.whole:
            _set_whole_body(request, op.body.content_type, value)
        else:
            body[arg.name] = value
    if op.body is not None and not op.body.whole and (body or op.body.required):
        if op.body.content_type == "application/x-www-form-urlencoded":
            request.data = {k: _scalar(v, ",") for k, v in body.items()}
        else:
            request.json = body
    return request


def _segment(value: str) -> str:
    """``value`` as one path segment: it cannot add segments, a query or a fragment, and
    "." or ".." cannot climb (URL normalisation would remove them, RFC 3986 5.2.4)."""
    if value in (".", ".."):
        return value.replace(".", "%2E")
    return quote(value, safe="")


def _set_whole_body(request: Request, content_type: str, value: Any) -> None:
    if content_type == "application/x-www-form-urlencoded" and isinstance(value, Mapping):
        request.data = {str(k): _scalar(v, ",") for k, v in value.items()}
    elif "json" in content_type or content_type == "application/x-www-form-urlencoded":
        request.json = value
    else:
        request.content = value if isinstance(value, str) else json.dumps(value)
    request.headers["content-type"] = content_type


def _scalar(value: Any, sep: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return sep.join(_scalar(v, sep) for v in value)
    if isinstance(value, Mapping):
        return sep.join(f"{k}{sep}{_scalar(v, sep)}" for k, v in value.items())
    return str(value)


def _header_value(value: str) -> str:
    # A header value with CR/LF would split the request (response-splitting's twin).
    if "\r" in value or "\n" in value:
        raise ValueError("a header argument cannot contain a line break")
    return value


def _query(arg: Argument, value: Any) -> list[tuple[str, str | int | float | bool | None]]:
    """OpenAPI 3.x "Style Values" for query parameters: form (exploded or not), deepObject,
    spaceDelimited and pipeDelimited."""
    if isinstance(value, Mapping):
        if arg.style == "deepObject":
            return [(f"{arg.name}[{k}]", _scalar(v, ",")) for k, v in value.items()]
        if arg.explode:
            return [(str(k), _scalar(v, ",")) for k, v in value.items()]
        return [(arg.name, _scalar(value, ","))]
    if isinstance(value, list | tuple):
        if arg.explode and arg.style == "form":
            return [(arg.name, _scalar(v, ",")) for v in value]
        sep = {"spaceDelimited": " ", "pipeDelimited": "|"}.get(arg.style, ",")
        return [(arg.name, sep.join(_scalar(v, ",") for v in value))]
    return [(arg.name, _scalar(value, ","))]


class Backend:
    """The API's HTTP client: given, or made on first use (per event loop) and closed at the
    server's shutdown; the headers of every call; the limits of every response."""

    def __init__(
        self,
        *,
        base_url: str | None,
        client: httpx.AsyncClient | None,
        transport: httpx.AsyncBaseTransport | None,
        headers: Mapping[str, str],
        auth: HeadersFor | None,
        timeout: float,
        max_response_bytes: int,
    ) -> None:
        self.base_url = base_url
        self.given = client
        self.transport = transport
        self.headers = dict(headers)
        self.auth = auth
        self.timeout = timeout
        self.max_response_bytes = max_response_bytes
        self._made: httpx.AsyncClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def client(self) -> httpx.AsyncClient:
        if self.given is not None:
            return self.given
        loop = asyncio.get_running_loop()
        if self._made is None or self._loop is not loop or self._made.is_closed:
            # A pool belongs to the loop it was made on (tests and `connect()` open several).
            self._made = httpx.AsyncClient(transport=self.transport, timeout=self.timeout)
            self._loop = loop
        return self._made

    async def aclose(self) -> None:
        made, self._made = self._made, None
        if made is not None and not made.is_closed:
            await made.aclose()

    async def send(self, request: Request, principal: Principal | None) -> tuple[httpx.Response, bytes]:
        headers = {**self.headers, **request.headers}
        if self.auth is not None:
            extra = self.auth(principal)
            if inspect.isawaitable(extra):
                extra = await extra
            headers.update(extra)
        client = self.client()
        url = self.base_url.rstrip("/") + request.path if self.base_url else request.path
        built = client.build_request(
            request.method,
            url,
            params=request.query or None,
            headers=headers,
            cookies=request.cookies or None,
            json=request.json,
            data=request.data,
            content=request.content,
            timeout=self.timeout,
        )
        try:
            response = await client.send(built, stream=True)
        except httpx.HTTPError as exc:
            raise CallFailed(f"{request.method} {built.url} failed: {type(exc).__name__}: {exc}") from None
        try:
            chunks: list[bytes] = []
            size = 0
            # Counted decoded, so a small gzip bomb is stopped at the limit too.
            async for chunk in response.aiter_bytes():
                size += len(chunk)
                if size > self.max_response_bytes:
                    raise CallFailed(
                        f"{request.method} {built.url}: the response is larger than "
                        f"max_response_bytes ({self.max_response_bytes})"
                    )
                chunks.append(chunk)
        except httpx.HTTPError as exc:
            raise CallFailed(f"{request.method} {built.url} failed: {type(exc).__name__}: {exc}") from None
        finally:
            await response.aclose()
        return response, b"".join(chunks)


def tool_result(op: Operation, response: httpx.Response, body: bytes) -> t.CallToolResult:
    """The API's answer as a tool result: 2xx as content (and structured content when the
    operation has an output schema), anything else ``isError`` with the status and the body."""
    content_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
    text = _text(body, response)
    if not 200 <= response.status_code < 300:
        detail = text if text is not None else f"<{len(body)} bytes of {content_type or 'data'}>"
        message = f"HTTP {response.status_code} {response.reason_phrase}: {detail}".rstrip(": ")
        return t.CallToolResult(content=[t.TextContent(text=message)], is_error=True)
    if op.output_schema is not None:
        try:
            value = json.loads(body) if body else None
        except ValueError:
            return t.CallToolResult(
                content=[
                    t.TextContent(text=f"The API answered {content_type or 'no content type'}, not JSON")
                ],
                is_error=True,
            )
        structured = {"result": value} if op.wraps_output else value
        return t.CallToolResult(
            content=[t.TextContent(text=json.dumps(value, ensure_ascii=False))], structured_content=structured
        )
    if text is not None:
        return t.CallToolResult(content=[t.TextContent(text=text)])
    if content_type.startswith("image/"):
        return t.CallToolResult(content=[binary.image(body, content_type)])
    if content_type.startswith("audio/"):
        return t.CallToolResult(content=[binary.audio(body, content_type)])
    blob = binary.blob(str(response.url), body, content_type or UNSET)
    return t.CallToolResult(content=[t.EmbeddedResource(resource=blob)])


def resource_contents(uri: str, response: httpx.Response, body: bytes) -> list[t.ResourceContents]:
    """A GET's answer as the contents of ``uri`` (text when it decodes, a blob otherwise)."""
    content_type = response.headers.get("content-type", "").split(";")[0].strip() or UNSET
    text = _text(body, response)
    if text is not None:
        return [t.TextResourceContents(uri=uri, text=text, mime_type=content_type)]
    return [binary.blob(uri, body, content_type)]


def _text(body: bytes, response: httpx.Response) -> str | None:
    content_type = response.headers.get("content-type", "").lower()
    if content_type and not (
        content_type.startswith("text/")
        or "json" in content_type
        or "xml" in content_type
        or "x-www-form-urlencoded" in content_type
    ):
        return None
    try:
        return body.decode(response.charset_encoding or "utf-8")
    except (UnicodeDecodeError, LookupError):
        return None
