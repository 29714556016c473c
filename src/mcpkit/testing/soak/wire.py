"""MCP over HTTP as the soak's clients speak it: raw messages, headers and SSE events.

The soak drives the wire itself (httpx, raw sockets) rather than through
:class:`~mcpkit.client.Client` where it must misbehave (leave mid-stream, read
slowly, resume with ``Last-Event-ID``) and see exactly what came back.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx

__all__ = [
    "ACCEPT_BOTH",
    "LEGACY",
    "MODERN",
    "OLD_SSE",
    "Event",
    "events",
    "legacy_headers",
    "modern_request",
    "rpc",
    "sse_messages",
]

MODERN = "2026-07-28"
LEGACY = "2025-11-25"
#: The HTTP+SSE transport's protocol version (two endpoints: GET /sse, POST messages).
OLD_SSE = "2024-11-05"
ACCEPT_BOTH = "application/json, text/event-stream"
CLIENT_INFO = {"name": "mcpkit-soak", "version": "1"}


def rpc(request_id: int | str | None, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if request_id is not None:
        message["id"] = request_id
    if params is not None:
        message["params"] = params
    return message


def modern_request(
    request_id: int | str, method: str, params: dict[str, Any], name: str | None = None, **meta: Any
) -> tuple[dict[str, str], dict[str, Any]]:
    """Headers and body of a 2026-07-28 request (no session; everything in ``_meta``)."""
    params = dict(params)
    params["_meta"] = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
        **meta,
    }
    headers = {
        "accept": ACCEPT_BOTH,
        "content-type": "application/json",
        "mcp-protocol-version": MODERN,
        "mcp-method": method,
    }
    if name is not None:
        headers["mcp-name"] = name
    return headers, rpc(request_id, method, params)


def legacy_headers(session: str | None, accept: str = ACCEPT_BOTH) -> dict[str, str]:
    headers = {"accept": accept, "content-type": "application/json"}
    if session is not None:
        headers["mcp-session-id"] = session
        headers["mcp-protocol-version"] = LEGACY
    return headers


def legacy_initialize(request_id: int | str = 0) -> dict[str, Any]:
    params = {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": CLIENT_INFO}
    return rpc(request_id, "initialize", params)


@dataclass
class Event:
    """One SSE event (``data`` empty for a priming event)."""

    id: str | None = None
    event: str = "message"
    data_lines: list[str] = field(default_factory=list)

    @property
    def data(self) -> str:
        return "\n".join(self.data_lines)

    def json(self) -> Any:
        return json.loads(self.data)


async def events(response: httpx.Response) -> AsyncIterator[Event]:
    """The SSE events of ``response`` as they arrive (comments skipped)."""
    current, seen = Event(), False
    async for line in response.aiter_lines():
        line = line.rstrip("\r")
        if line == "":
            if seen:
                yield current
            current, seen = Event(), False
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        seen = True
        if name == "data":
            current.data_lines.append(value)
        elif name == "id":
            current.id = value
        elif name == "event":
            current.event = value
    if seen:
        yield current


def sse_messages(text: str) -> list[Any]:
    """The JSON-RPC messages of a complete SSE body."""
    out: list[Any] = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        data = [line[5:].lstrip(" ") for line in block.split("\n") if line.startswith("data:")]
        if data and any(data):
            out.append(json.loads("\n".join(data)))
    return out


def messages_of(response: httpx.Response) -> list[Any]:
    """The JSON-RPC messages of a complete response, JSON or SSE."""
    ctype = response.headers.get("content-type", "")
    if ctype.startswith("application/json"):
        return [response.json()]
    if ctype.startswith("text/event-stream"):
        return sse_messages(response.text)
    raise ValueError(
        f"HTTP {response.status_code} {ctype or 'without a content type'}: {response.text[:200]}"
    )


def final_of(messages: list[Any]) -> dict[str, Any]:
    """The one JSON-RPC response among ``messages`` (ValueError when not exactly one)."""
    finals = [m for m in messages if isinstance(m, dict) and "id" in m and ("result" in m or "error" in m)]
    if len(finals) != 1:
        raise ValueError(f"{len(finals)} responses in {messages!r:.300}")
    return finals[0]


def text_of(message: dict[str, Any]) -> str:
    """The text of a one-text-block tool result (ValueError for anything else)."""
    if "result" not in message:
        raise ValueError(f"an error, not a result: {message.get('error')}")
    content = message["result"].get("content") or message["result"].get("contents")
    if not content or "text" not in content[0]:
        raise ValueError(f"no text in {message!r:.300}")
    text: str = content[0]["text"]
    return text
