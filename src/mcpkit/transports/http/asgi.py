"""Small ASGI helpers: headers, bounded body reads, plain responses."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any

__all__ = ["ASGIApp", "HTTPFailure", "Receive", "Scope", "Send", "headers_of", "read_body", "respond"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class HTTPFailure(Exception):
    """Answer with this status (and optional JSON body) instead of going on."""

    def __init__(
        self,
        status: int,
        message: str,
        body: bytes | None = None,
        headers: Iterable[tuple[bytes, bytes]] = (),
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.body = body
        self.headers = list(headers)


def headers_of(scope: Scope) -> dict[str, str]:
    """Request headers by lower-case name (ASGI already lower-cases them).

    A repeated header is joined with ", " (RFC 9110 5.3), so a smuggled second
    ``Mcp-Method`` cannot hide behind the first: the joined value matches nothing.
    Values lose surrounding whitespace (RFC 9110 5.5): not every HTTP parser
    under the ASGI server strips it (httptools keeps trailing spaces).
    """
    out: dict[str, str] = {}
    for raw_name, raw_value in scope.get("headers", ()):
        name = raw_name.decode("latin-1")
        value = raw_value.decode("latin-1").strip(" \t")
        out[name] = f"{out[name]}, {value}" if name in out else value
    return out


async def read_body(receive: Receive, headers: dict[str, str], limit: int, timeout: float) -> bytes:
    """The whole request body, refusing more than ``limit`` bytes or slower than ``timeout``."""
    declared = headers.get("content-length")
    if declared is not None:
        if not declared.isdigit():
            raise HTTPFailure(400, "invalid Content-Length")
        if int(declared) > limit:
            raise HTTPFailure(413, f"request body larger than {limit} bytes")
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(timeout):
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    raise HTTPFailure(499, "client disconnected")
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > limit:
                    raise HTTPFailure(413, f"request body larger than {limit} bytes")
                chunks.append(chunk)
                if not message.get("more_body", False):
                    break
    except TimeoutError:
        raise HTTPFailure(408, f"request body not received within {timeout:g}s") from None
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


async def respond(
    send: Send,
    status: int,
    body: bytes = b"",
    content_type: bytes | None = b"application/json",
    headers: Iterable[tuple[bytes, bytes]] = (),
) -> None:
    """A complete, non-streaming response."""
    raw = [(b"content-length", str(len(body)).encode())]
    if body and content_type is not None:
        raw.append((b"content-type", content_type))
    raw.extend(headers)
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})
