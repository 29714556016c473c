"""What both client HTTP transports share (:mod:`mcpkit.transports.http_client`): the
inbox the session reads, bounded reads of bodies and SSE events, and the few fields of a
message they look at."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine, Mapping
from typing import Any

import httpx
import msgspec

from ..protocol import jsonrpc
from ..protocol.errors import HTTP_TRANSPORT_ERROR, MESSAGE_TOO_LARGE
from ..protocol.framing import DEFAULT_MAX_LINE_BYTES, Oversized
from ..session.channel import read_queued
from .sse_reader import SSEParser

__all__ = ["ChannelBase", "HTTPTransportError", "MessageTooLarge"]

# HTTP_TRANSPORT_ERROR is a local condition, never sent by a peer (basic/index
# "Error Codes": local errors must not be mistakable for the peer's); it carries
# the HTTP status in ``data``.


class HTTPTransportError(Exception):
    """The HTTP exchange itself failed (status, connection)."""


class MessageTooLarge(HTTPTransportError):
    """A response body or SSE event from the server is larger than ``max_message_bytes``."""

    def __init__(self, what: str, limit: int) -> None:
        super().__init__(f"{what} exceeds the client's max_message_bytes ({limit} bytes)")
        self.limit = limit


# Past this many messages read from the server and not yet taken by the session,
# SSE streams stop being read (TCP pushes back on the server) until it catches up.
_INBOX_HIGH_WATER = 1024


class _Envelope(msgspec.Struct):
    id: int | str | msgspec.UnsetType | None = msgspec.UNSET
    method: str | msgspec.UnsetType = msgspec.UNSET
    params: dict[str, Any] | msgspec.UnsetType = msgspec.UNSET
    result: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    error: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET


_envelope = msgspec.json.Decoder(_Envelope)


class _Reply(msgspec.Struct):
    """What is read of a message from the server: never its params, which a hostile
    server may nest deeper than the decoder can recurse (RecursionError, not DecodeError)."""

    id: int | str | msgspec.UnsetType | None = msgspec.UNSET
    method: str | msgspec.UnsetType = msgspec.UNSET
    result: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    error: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET


_reply = msgspec.json.Decoder(_Reply)


def _transport_error(request_id: int | str | None, status: int | None, message: str) -> bytes:
    return jsonrpc.encode_error(request_id, HTTP_TRANSPORT_ERROR, message, {"status": status})


def _too_large_error(request_id: int | str | None, message: str, limit: int) -> bytes:
    return jsonrpc.encode_error(request_id, MESSAGE_TOO_LARGE, message, {"limit": limit})


class ChannelBase:
    """Inbox plumbing shared by both client transports."""

    def __init__(
        self,
        url: str,
        headers: Mapping[str, str] | None,
        http: httpx.AsyncClient | None,
        auth: httpx.Auth | None = None,
        max_message_bytes: int = DEFAULT_MAX_LINE_BYTES,
    ) -> None:
        if max_message_bytes < 1:
            raise ValueError("max_message_bytes must be positive")
        self.url = url
        #: The largest JSON body or SSE event accepted from the server (hostile servers:
        #: a bigger one fails the request it answers, it is never buffered whole).
        self.max_message_bytes = max_message_bytes
        self.headers = dict(headers or {})
        self._own_http = http is None
        # Redirects are not followed: OAuth flows follow (and re-check) their own.
        self.http = http or httpx.AsyncClient(
            timeout=httpx.Timeout(30.0, read=None), follow_redirects=False, auth=auth
        )
        self._inbox: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._room = asyncio.Event()
        self._room.set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self.closed = False

    def _push(self, data: bytes) -> None:
        if not self.closed:
            self._inbox.put_nowait(data)

    async def _deliver(self, data: bytes) -> None:
        """Push a message read from a stream; wait while the session is behind."""
        self._push(data)
        if self._inbox.qsize() >= _INBOX_HIGH_WATER:
            self._room.clear()
            await self._room.wait()

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _read_body(self, response: httpx.Response) -> bytes:
        """The body, refused (:class:`MessageTooLarge`) as soon as it passes the limit."""
        limit = self.max_message_bytes
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise MessageTooLarge(f"the response body ({declared} bytes)", limit)
        body = bytearray()
        async for chunk in response.aiter_bytes():
            body += chunk
            if len(body) > limit:
                raise MessageTooLarge("the response body", limit)
        return bytes(body)

    async def _events(self, response: httpx.Response) -> Any:
        """The SSE events of ``response``, each at most ``max_message_bytes``."""
        parser = SSEParser(self.max_message_bytes)
        async for chunk in response.aiter_bytes():
            for event in parser.feed_bytes(chunk):
                yield event

    async def read(self) -> list[bytes | Oversized] | None:
        self._room.set()
        batch = await read_queued(self._inbox)
        self._room.set()
        return batch

    async def drain(self) -> None:
        return None

    async def _close_base(self) -> None:
        self.closed = True
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await task
        self._inbox.put_nowait(None)
        self._room.set()
        if self._own_http:
            await self.http.aclose()


def _request_id(message: _Envelope) -> int | str | None:
    """The id of an outbound request (None for notifications and responses)."""
    if isinstance(message.method, msgspec.UnsetType) or not isinstance(message.id, int | str):
        return None
    return message.id


class _Cancelled(msgspec.Struct):
    method: str
    params: dict[str, Any] | msgspec.UnsetType = msgspec.UNSET


_cancelled = msgspec.json.Decoder(_Cancelled)


def _cancelled_id(data: bytes) -> int | str | None:
    """The request a ``notifications/cancelled`` we send names (None for anything else)."""
    if b'"notifications/cancelled"' not in data:
        return None
    try:
        note = _cancelled.decode(data)
    except msgspec.DecodeError:
        return None
    if note.method != "notifications/cancelled" or not isinstance(note.params, dict):
        return None
    rid = note.params.get("requestId")
    return rid if isinstance(rid, int | str) else None


def _outbound_request_id(data: bytes) -> int | str | None:
    try:
        return _request_id(_envelope.decode(data))
    except msgspec.DecodeError:
        return None


def _is_error_object(raw: msgspec.Raw | msgspec.UnsetType) -> bool:
    if isinstance(raw, msgspec.UnsetType):
        return False
    try:
        error = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return False
    return isinstance(error, dict) and isinstance(error.get("code"), int)


def _code_and_message(raw: msgspec.Raw) -> tuple[int, str]:
    try:
        error = msgspec.json.decode(raw)
        return int(error["code"]), str(error["message"])
    except (msgspec.DecodeError, KeyError, TypeError, ValueError):
        return HTTP_TRANSPORT_ERROR, "malformed error"
