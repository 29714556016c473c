"""Client side of Streamable HTTP (both eras) and of the legacy HTTP+SSE transport.

Both are :class:`~mcpkit.session.channel.Channel`\\ s: the session engine
writes messages and reads whatever the server sends back, on whichever HTTP
response it arrives. Each outbound message is its own POST; answers come back
as JSON or as an SSE stream.

- Legacy era: the session id from ``initialize`` goes on every request; a
  standalone GET stream carries server-initiated messages; an SSE stream that
  ends before its answer is resumed with ``Last-Event-ID`` after ``retry``.
- Modern era: the headers mirror the body (``MCP-Protocol-Version``,
  ``Mcp-Method``, ``Mcp-Name``, ``Mcp-Param-*``); a stream that drops before its
  answer is re-issued as a new request (streams are not resumable in 2026-07-28).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from typing import Any
from urllib.parse import urljoin

import anyio
import httpx
import msgspec

from ..protocol import http as h
from ..protocol import jsonrpc
from ..protocol.errors import MCPError
from ..protocol.framing import DEFAULT_MAX_LINE_BYTES
from ._http_common import (
    ChannelBase,
    HTTPTransportError,
    MessageTooLarge,
    _cancelled_id,
    _code_and_message,
    _Envelope,
    _envelope,
    _is_error_object,
    _outbound_request_id,
    _Reply,
    _reply,
    _request_id,
    _too_large_error,
    _transport_error,
)
from .sse_reader import SSEBytesEvent, SSEEventTooLarge

__all__ = ["HTTPTransportError", "MessageTooLarge", "SSEClientChannel", "StreamableHTTPChannel"]

logger = logging.getLogger("mcpkit.client.http")


class StreamableHTTPChannel(ChannelBase):
    """A client connection to a Streamable HTTP endpoint."""

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        http: httpx.AsyncClient | None = None,
        auth: httpx.Auth | None = None,
        max_reconnects: int = 5,
        default_retry_ms: int = 1000,
        max_message_bytes: int = DEFAULT_MAX_LINE_BYTES,
    ) -> None:
        super().__init__(url, headers, http, auth, max_message_bytes)
        #: Set after ``initialize`` (legacy): sent as MCP-Protocol-Version.
        self.protocol_version: str | None = None
        self.session_id: str | None = None
        #: ``x-mcp-header`` maps of known tools, for Mcp-Param-* headers (modern).
        self.tool_headers: dict[str, dict[str, tuple[str, ...]]] = {}
        #: HTTP status of the last failed POST (era detection reads it).
        self.last_status: int | None = None
        self.max_reconnects = max_reconnects
        self.default_retry_ms = default_retry_ms
        self._get_task: asyncio.Task[None] | None = None
        #: The POST of each outbound request still open, by request id.
        #: (the task, and the anyio scope that stops it: see :meth:`write`)
        self._requests: dict[int | str, tuple[asyncio.Task[Any], anyio.CancelScope]] = {}

    def write(self, data: bytes, related: int | str | None = None) -> None:
        if self.closed:
            return
        cancelled = _cancelled_id(data)
        if cancelled is not None:
            # The session gave up on that request (its deadline passed, or the caller
            # cancelled): stop reading its stream, whatever the server still sends.
            # Stopped through its anyio scope, not Task.cancel(): httpx closes the response
            # (and its connection) under anyio's shield, which holds off anyio cancellation
            # only; a Task.cancel() landing inside that close (the answer just ended) dropped
            # it, leaving the connection open and busy in the pool until the client closed.
            posting = self._requests.pop(cancelled, None)
            if posting is not None:
                posting[1].cancel()
        scope = anyio.CancelScope()
        task = self._spawn(self._post_in(scope, data))
        rid = _outbound_request_id(data)
        if rid is not None:
            self._requests[rid] = (task, scope)
            task.add_done_callback(lambda done: self._forget(rid, done))

    async def _post_in(self, scope: anyio.CancelScope, data: bytes) -> None:
        with scope:
            await self._post(data)

    def _forget(self, rid: int | str, task: asyncio.Task[Any]) -> None:
        posting = self._requests.get(rid)
        if posting is not None and posting[0] is task:
            del self._requests[rid]

    def respond(self, request_id: int | str | None, data: bytes, error: MCPError | None = None) -> None:
        if request_id is None and error is not None:
            # An error about something unreadable the server sent (garbage on a stream):
            # it names no request, so POSTing it back helps nobody and would let a
            # server that streams garbage make us send one request per message.
            logger.debug("not sending %s to the server: %s", error.code, error.message)
            return
        self.write(data)

    # -- POST ----------------------------------------------------------------

    def _headers_for(self, message: _Envelope) -> dict[str, str]:
        """The POST's headers; ValueError when a modern body has no header form."""
        headers = {
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            **self.headers,
        }
        meta = message.params.get("_meta") if isinstance(message.params, dict) else None
        modern_version = (
            meta.get("io.modelcontextprotocol/protocolVersion") if isinstance(meta, dict) else None
        )
        if isinstance(modern_version, str):
            headers["mcp-protocol-version"] = modern_version
            if not isinstance(message.method, msgspec.UnsetType):
                params = message.params if isinstance(message.params, dict) else {}
                tool = params.get("name") if message.method == "tools/call" else None
                tool_headers = self.tool_headers.get(tool) if isinstance(tool, str) else None
                headers.update(h.mirror_headers(modern_version, message.method, params, tool_headers))
        else:
            if self.protocol_version is not None:
                headers["mcp-protocol-version"] = self.protocol_version
            if self.session_id is not None:
                headers["mcp-session-id"] = self.session_id
        return headers

    async def _post(self, data: bytes, attempt: int = 0) -> None:
        message = _envelope.decode(data)
        request_id = _request_id(message)
        is_request = request_id is not None
        try:
            headers = self._headers_for(message)
        except ValueError as exc:
            # 2026-07-28: the headers must mirror the body, and this body has no header
            # form (e.g. a method with surrounding spaces): refuse here, under the
            # request's id, rather than send what the server must refuse or what the
            # HTTP library chokes on (non-ASCII raised out of this task, and the
            # caller waited for an answer that never came).
            logger.warning("not sending a message to %s: %s", self.url, exc)
            if is_request:
                self._push(_transport_error(request_id, None, f"cannot send over Streamable HTTP: {exc}"))
            return
        modern = "mcp-method" in headers
        try:
            async with self.http.stream("POST", self.url, content=data, headers=headers) as response:
                session = response.headers.get("mcp-session-id")
                if session is not None and not modern:
                    self.session_id = session
                if response.status_code == 202:
                    return
                ctype = response.headers.get("content-type", "").split(";", 1)[0].strip().lower()
                if response.status_code == 200 and ctype == "text/event-stream":
                    state: dict[str, Any] = {}
                    if await self._consume(response, request_id, state) or not is_request:
                        return
                    if state.get("too_large"):
                        self._push(_too_large_error(request_id, state["too_large"], self.max_message_bytes))
                        return
                    if not modern:
                        # Legacy: resume where the stream broke (2025-11-25 "Resumability").
                        await self._resume(state, request_id)
                        return
                    if attempt < self.max_reconnects:
                        # 2026-07-28: no resumption; the request is re-issued.
                        await self._post(data, attempt + 1)
                        return
                    self._push(_transport_error(request_id, None, "stream ended before the response"))
                    return
                body = await self._read_body(response)
                if response.status_code >= 400:
                    self.last_status = response.status_code
                if ctype == "application/json" and body:
                    self._push_answer(body, request_id, response.status_code)
                elif is_request:
                    self._push(
                        _transport_error(
                            request_id,
                            response.status_code,
                            f"HTTP {response.status_code} from {self.url}",
                        )
                    )
        except MessageTooLarge as exc:
            logger.warning("%s from %s", exc, self.url)
            if is_request:
                self._push(_too_large_error(request_id, f"{exc} (from {self.url})", exc.limit))
        except httpx.HTTPError as exc:
            if is_request:
                self._push(_transport_error(request_id, None, f"HTTP request failed: {exc}"))

    def _push_answer(self, body: bytes, request_id: int | str | None, status: int) -> None:
        try:
            reply: _Reply | None = _reply.decode(body)
        except (msgspec.DecodeError, RecursionError):
            reply = None
        if reply is None or (
            isinstance(reply.result, msgspec.UnsetType) and not _is_error_object(reply.error)
        ):
            # Not a JSON-RPC response (e.g. {"error": "gone"} from a proxy): feeding it to
            # the session would make it answer back and loop; report the HTTP failure.
            if isinstance(request_id, int | str):
                self._push(_transport_error(request_id, status, f"HTTP {status} from {self.url}"))
            return
        if (
            reply.id is None
            and isinstance(request_id, int | str)
            and not isinstance(reply.error, msgspec.UnsetType)
        ):
            # An error the server could not tie to our id (e.g. 400 before parsing): it is ours.
            body = jsonrpc.encode_error(request_id, *_code_and_message(reply.error))
        self._push(body)

    async def _consume(
        self, response: httpx.Response, request_id: Any, state: dict[str, Any] | None = None
    ) -> bool:
        """Forward an SSE stream's messages; True once the answer to ``request_id`` came."""
        state = state if state is not None else {}
        answered = False
        event: SSEBytesEvent
        try:
            async for event in self._events(response):
                if event.id:
                    state["last_id"] = event.id
                if event.retry is not None:
                    state["retry"] = event.retry
                if not event.data:
                    continue  # priming event: only an id and a retry interval
                data = event.data
                await self._deliver(data)
                if request_id is not None and not answered:
                    with contextlib.suppress(msgspec.DecodeError, RecursionError):
                        reply = _reply.decode(data)
                        answered = reply.id == request_id and isinstance(reply.method, msgspec.UnsetType)
        except SSEEventTooLarge as exc:
            # The stream cannot be read past the event: it is given up, not resumed.
            logger.warning("%s, from %s", exc, self.url)
            state["too_large"] = f"{exc} (from {self.url})"
            state.pop("last_id", None)
        state["answered"] = answered
        return answered

    async def _resume(self, state: dict[str, Any], request_id: Any) -> None:
        for _ in range(self.max_reconnects):
            if "last_id" not in state:
                break
            await asyncio.sleep(state.get("retry", self.default_retry_ms) / 1000)
            headers = {"accept": "text/event-stream", "last-event-id": state["last_id"], **self.headers}
            if self.session_id:
                headers["mcp-session-id"] = self.session_id
            if self.protocol_version:
                headers["mcp-protocol-version"] = self.protocol_version
            try:
                async with self.http.stream("GET", self.url, headers=headers) as response:
                    if response.status_code != 200:
                        break
                    if await self._consume(response, request_id, state):
                        return
                    if state.get("too_large"):
                        break
            except httpx.HTTPError:
                continue
        if request_id is not None and state.get("too_large"):
            self._push(_too_large_error(request_id, state["too_large"], self.max_message_bytes))
        elif request_id is not None:
            self._push(_transport_error(request_id, None, "stream ended before the response"))

    def start_listening(self) -> None:
        """Open the legacy standalone GET stream for server-initiated messages."""
        if self._get_task is None and self.session_id is not None:
            self._get_task = asyncio.ensure_future(self._listen())
            self._tasks.add(self._get_task)

    async def _listen(self) -> None:
        state: dict[str, Any] = {}
        failures = 0
        while not self.closed and failures < self.max_reconnects:
            headers = {"accept": "text/event-stream", **self.headers}
            if self.session_id:
                headers["mcp-session-id"] = self.session_id
            if self.protocol_version:
                headers["mcp-protocol-version"] = self.protocol_version
            if "last_id" in state:
                headers["last-event-id"] = state["last_id"]
            try:
                async with self.http.stream("GET", self.url, headers=headers) as response:
                    if response.status_code in (404, 405, 409):
                        return  # the server offers no (more) GET stream
                    if response.status_code != 200:
                        failures += 1
                    else:
                        failures = 0
                        await self._consume(response, None, state)
                        if state.pop("too_large", None):
                            failures += 1
            except httpx.HTTPError:
                failures += 1
            await asyncio.sleep(state.get("retry", self.default_retry_ms) / 1000)

    async def close(self) -> None:
        if self.closed:
            return
        if self.session_id is not None:
            headers = {"mcp-session-id": self.session_id, **self.headers}
            if self.protocol_version:
                headers["mcp-protocol-version"] = self.protocol_version
            with contextlib.suppress(httpx.HTTPError):
                # Streamed and not read: only the status matters, whatever size the body.
                async with self.http.stream("DELETE", self.url, headers=headers, timeout=5.0):
                    pass
        await self._close_base()


class SSEClientChannel(ChannelBase):
    """A client connection over the 2024-11-05 HTTP+SSE transport."""

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        http: httpx.AsyncClient | None = None,
        auth: httpx.Auth | None = None,
        connect_timeout: float = 10.0,
        max_message_bytes: int = DEFAULT_MAX_LINE_BYTES,
    ) -> None:
        super().__init__(url, headers, http, auth, max_message_bytes)
        self.endpoint: str | None = None
        self.connect_timeout = connect_timeout
        self._ready = asyncio.Event()
        self._stream_task: asyncio.Task[None] | None = None
        #: Our requests not answered yet: failed by name if the stream breaks on a too-large event.
        self._unanswered: set[int | str] = set()

    async def connect(self) -> None:
        """Open the SSE stream and wait for its ``endpoint`` event."""
        self._stream_task = asyncio.ensure_future(self._stream())
        self._tasks.add(self._stream_task)
        try:
            async with asyncio.timeout(self.connect_timeout):
                await self._ready.wait()
        except TimeoutError:
            raise HTTPTransportError(f"no endpoint event from {self.url}") from None
        if self.endpoint is None:
            raise HTTPTransportError(f"could not open an SSE stream at {self.url}")

    async def _stream(self) -> None:
        headers = {"accept": "text/event-stream", **self.headers}
        try:
            async with self.http.stream("GET", self.url, headers=headers) as response:
                if response.status_code != 200:
                    return
                async for event in self._events(response):
                    if event.event == "endpoint":
                        endpoint = urljoin(self.url, event.data.decode().strip())
                        if _origin(endpoint) != _origin(self.url):
                            # The endpoint must be on the same origin (2024-11-05 transports).
                            logger.warning("refusing cross-origin endpoint %s", endpoint)
                            return
                        self.endpoint = endpoint
                        self._ready.set()
                    elif event.data:
                        data = event.data
                        if self._unanswered:
                            with contextlib.suppress(msgspec.DecodeError, RecursionError):
                                reply = _reply.decode(data)
                                if isinstance(reply.method, msgspec.UnsetType) and reply.id is not None:
                                    self._unanswered.discard(reply.id)
                        await self._deliver(data)
        except SSEEventTooLarge as exc:
            # One stream carries every answer: past an event too large to read, none can
            # be trusted to come. The connection ends; every unanswered request fails, naming
            # the limit (the event may have been any of their answers).
            logger.warning("%s; closing the connection to %s", exc, self.url)
            for rid in sorted(self._unanswered, key=str):
                self._push(_too_large_error(rid, f"{exc} (from {self.url})", self.max_message_bytes))
            self._unanswered.clear()
        except httpx.HTTPError as exc:
            logger.debug("SSE stream ended: %s", exc)
        finally:
            self._ready.set()
            self._inbox.put_nowait(None)

    def write(self, data: bytes, related: int | str | None = None) -> None:
        if not self.closed:
            cancelled = _cancelled_id(data)
            if cancelled is not None:
                self._unanswered.discard(cancelled)  # the session gave up on it
            self._spawn(self._post(data))

    def respond(self, request_id: int | str | None, data: bytes, error: MCPError | None = None) -> None:
        if request_id is None and error is not None:
            logger.debug("not sending %s to the server: %s", error.code, error.message)
            return  # as for Streamable HTTP: an error naming no request is not POSTed back
        self.write(data)

    async def _post(self, data: bytes) -> None:
        assert self.endpoint is not None
        message = _envelope.decode(data)
        request_id = _request_id(message)
        is_request = request_id is not None
        if request_id is not None:
            self._unanswered.add(request_id)
        headers = {"content-type": "application/json", **self.headers}
        try:
            # Streamed and never read: the answer comes on the SSE stream, and a hostile
            # server's body here (of any size) is not ours to buffer.
            async with self.http.stream("POST", self.endpoint, content=data, headers=headers) as response:
                status = response.status_code
        except httpx.HTTPError as exc:
            if is_request:
                self._unanswered.discard(request_id)
                self._push(_transport_error(request_id, None, f"HTTP request failed: {exc}"))
            return
        if status >= 400 and is_request:
            self._unanswered.discard(request_id)
            self._push(_transport_error(request_id, status, f"HTTP {status} from {self.endpoint}"))

    async def close(self) -> None:
        await self._close_base()


def _origin(url: str) -> tuple[str, str]:
    parts = httpx.URL(url)
    return parts.scheme, parts.netloc.decode()
