"""Answering one request over HTTP: JSON when the result comes first, else SSE."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable
from typing import TYPE_CHECKING

import msgspec

from ...protocol import http as h
from ...protocol import jsonrpc
from ...protocol.errors import INVALID_REQUEST
from ...protocol.framing import Oversized
from .asgi import HTTPFailure, Receive, Send, respond
from .settings import HTTPSettings
from .streams import ResponseStream, StreamItem, pump_sse

if TYPE_CHECKING:
    from ...session.engine import Engine
    from .sessions import LegacyHTTPSession

__all__ = ["SingleChannel", "answer", "fail", "json_answer", "jsonrpc_error"]

_any = msgspec.json.Decoder()


class SingleChannel:
    """The outbound side of a one-request connection (modern, stateless legacy)."""

    __slots__ = ("stream",)

    def __init__(self, stream: ResponseStream) -> None:
        self.stream = stream

    async def read(self) -> list[bytes | Oversized] | None:
        return None

    def write(self, data: bytes, related: int | str | None = None, final: bool = False) -> None:
        self.stream.push(data, final)

    async def drain(self) -> None:
        return None

    async def close(self) -> None:
        self.stream.close()


async def answer(
    settings: HTTPSettings,
    stream: ResponseStream,
    engine: Engine,
    request_id: int | str,
    receive: Receive,
    send: Send,
    json_ok: bool,
    sse_ok: bool,
    *,
    modern: bool,
    session: LegacyHTTPSession | None = None,
    extra: list[tuple[bytes, bytes]] | None = None,
) -> None:
    """Send the request's answer as JSON when it is ready first, else as SSE."""
    mode = settings.json_response
    want_json = json_ok and mode is not False
    want_sse = sse_ok and mode is not True
    first = stream.ready()
    if first is None:
        first = await _first(stream, engine, request_id, receive, modern, want_sse)
        if first is None:
            return  # the client went away
    if first.final and want_json:
        await json_answer(send, first.data, modern, extra)
        return
    if not want_sse:
        # JSON only: what came before the result has nowhere to go in this era's
        # rules (legacy: it already went to the GET stream; modern: dropped).
        item: StreamItem | None = first
        while item is not None and not item.final:
            item = await stream.get()
        if item is not None:
            await json_answer(send, item.data, modern, extra)
        return
    resumable = session is not None
    if session is not None and session.shared is not None:
        session.shared.persist(session, stream)  # resumable on any worker

    def disconnected() -> None:
        if modern:
            # 2026-07-28: closing the response stream cancels the request.
            engine.cancel_local(request_id)

    await pump_sse(
        send,
        receive,
        stream,
        first=first,
        resumable=resumable,
        retry_ms=settings.sse_retry_ms,
        keepalive=settings.keepalive_interval,
        on_disconnect=disconnected,
        extra_headers=extra,
    )


async def _first(
    stream: ResponseStream,
    engine: Engine,
    request_id: int | str,
    receive: Receive,
    modern: bool,
    want_sse: bool,
) -> StreamItem | None:
    """Wait for the first message, watching for the client leaving meanwhile."""

    async def watch() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        stream.close()
        if modern:
            engine.cancel_local(request_id)

    watcher = asyncio.ensure_future(watch())
    try:
        return await stream.get()
    finally:
        watcher.cancel()


def _error_code(data: bytes) -> int | None:
    if data.find(b'"result":') != -1:
        return None
    try:
        code = _any.decode(data)["error"]["code"]
    except (msgspec.DecodeError, KeyError, TypeError):
        return None
    return code if isinstance(code, int) else None


async def json_answer(
    send: Send, data: bytes, modern: bool, extra: Iterable[tuple[bytes, bytes]] | None
) -> None:
    code = _error_code(data)
    status = 200 if code is None else h.status_for_error(code, modern=modern)
    await respond(send, status, data, headers=extra or ())


async def jsonrpc_error(
    send: Send, status: int, request_id: int | str | None, code: int, message: str
) -> None:
    await respond(send, status, jsonrpc.encode_error(request_id, code, message))


async def fail(send: Send, failure: HTTPFailure) -> None:
    body = failure.body
    if body is None:
        body = jsonrpc.encode_error(None, INVALID_REQUEST, failure.message)
    with contextlib.suppress(Exception):
        await respond(send, failure.status, body, headers=failure.headers)
