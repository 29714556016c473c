"""Answering one request over HTTP: JSON when the result comes first, else SSE."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import msgspec

from ...protocol import http as h
from ...protocol import jsonrpc
from ...protocol.errors import INTERNAL_ERROR, INVALID_REQUEST, MCPError, ProtocolError
from ...protocol.framing import Oversized
from ...protocol.jsonrpc import ErrorObject, ErrorResponse, Request
from .asgi import HTTPFailure, Receive, Send, respond
from .settings import HTTPSettings
from .streams import ResponseStream, StreamItem, pump_sse

if TYPE_CHECKING:
    from ...session.engine import Engine
    from .sessions import LegacyHTTPSession

__all__ = ["ReplyForm", "SingleChannel", "answer", "fail", "json_answer", "jsonrpc_error", "refuse_unsent"]


class SingleChannel:
    """The outbound side of a one-request connection (modern, stateless legacy)."""

    __slots__ = ("stream",)

    def __init__(self, stream: ResponseStream) -> None:
        self.stream = stream

    async def read(self) -> list[bytes | Oversized] | None:
        return None

    def write(self, data: bytes, related: int | str | None = None) -> None:
        self.stream.push(data)

    def respond(self, request_id: int | str | None, data: bytes, error: MCPError | None = None) -> None:
        self.stream.push(data, True, error)

    async def drain(self) -> None:
        return None

    async def close(self) -> None:
        self.stream.close()


class ReplyForm(msgspec.Struct, frozen=True):
    """How one POST may be answered: a JSON body, an SSE stream, or either;
    and which era's rules choose the status of an error answer."""

    json: bool
    sse: bool
    modern: bool

    @classmethod
    def negotiate(cls, accept: str | None, json_response: bool | None, *, modern: bool) -> ReplyForm | None:
        """What the client's ``Accept`` and the server's ``json_response`` setting
        leave (None: nothing the client accepts, a 406)."""
        if not accept:
            json_ok, sse_ok = True, False
        else:
            value = accept.lower()
            anything = "*/*" in value
            json_ok = anything or "application/json" in value
            sse_ok = anything or "text/event-stream" in value
        if not (json_ok or sse_ok):
            return None
        # json_response=True: JSON whenever the client takes it; False: SSE whenever it does.
        return cls(
            json=json_ok and json_response is not False,
            sse=sse_ok and json_response is not True,
            modern=modern,
        )

    def era(self, *, modern: bool) -> ReplyForm:
        """The same form under ``modern``'s status rules."""
        return self if self.modern is modern else ReplyForm(self.json, self.sse, modern)


async def answer(
    settings: HTTPSettings,
    stream: ResponseStream,
    engine: Engine[Any],
    request_id: int | str,
    receive: Receive,
    send: Send,
    form: ReplyForm,
    *,
    session: LegacyHTTPSession | None = None,
    extra: list[tuple[bytes, bytes]] | None = None,
) -> None:
    """Send the request's answer as JSON when it is ready first, else as SSE."""
    first = stream.ready()
    if first is None:
        first, gone = await _first(stream, engine, request_id, receive, form.modern)
        if gone:
            return  # the client went away
        if first is None and (form.sse or _ended(engine, session)):
            # Closed by the server before anything was sent: its session ended,
            # or SSE polling (the client resumes from the priming event).
            await _ended_early(settings, stream, engine, request_id, receive, send, form, session, extra)
            return
    if first is not None and first.final and form.json:
        await json_answer(send, first, form.modern, extra)
        return
    if not form.sse:
        # JSON only: what comes before the result has no way to the client. A request
        # to the client (roots/list, sampling, elicitation) fails at once in its handler
        # (else it waited for an answer that could never come); notifications are dropped.
        item: StreamItem | None = first
        while item is None or not item.final:
            if item is None:
                if _ended(engine, session) or stream.finished:
                    await _ended_early(
                        settings, stream, engine, request_id, receive, send, form, session, extra
                    )
                    return
                # SSE polling asks a client to reconnect that cannot take SSE: it
                # waits for its answer on this response instead.
                if not stream.reopen(stream.seq):
                    stream.closed = False
            else:
                refuse_unsent(engine, item.data)
            item = await stream.get()
        await json_answer(send, item, form.modern, extra)
        return
    assert first is not None
    resumable = session is not None
    if session is not None and session.shared is not None:
        session.shared.persist(session, stream)  # resumable on any worker

    def disconnected() -> None:
        if form.modern:
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


def refuse_unsent(engine: Engine[Any], data: bytes) -> None:
    """``data`` will never reach the client (its response is JSON): if it is a request
    of ours, fail it at once with an error saying why, instead of leaving its handler
    waiting for an answer that cannot come."""
    try:
        message = jsonrpc.decode_message(data)
    except ProtocolError:
        return
    if isinstance(message, Request):
        why = (
            f"{message.method} cannot reach the client: the request it serves is answered as "
            "application/json (json_response=True, or the client does not accept text/event-stream)"
        )
        engine.feed_message(ErrorResponse(message.id, ErrorObject(INTERNAL_ERROR, why)))


async def _first(
    stream: ResponseStream, engine: Engine[Any], request_id: int | str, receive: Receive, modern: bool
) -> tuple[StreamItem | None, bool]:
    """Wait for the first message, watching for the client leaving meanwhile:
    the message (None: the stream was closed first) and whether the client left."""
    gone = False

    async def watch() -> None:
        nonlocal gone
        while (await receive())["type"] != "http.disconnect":
            pass
        gone = True
        stream.close()
        if modern:
            engine.cancel_local(request_id)

    watcher = asyncio.ensure_future(watch())
    try:
        return await stream.get(), gone
    finally:
        watcher.cancel()


def _ended(engine: Engine[Any], session: LegacyHTTPSession | None) -> bool:
    """Whether the connection the request belongs to has ended (its session closes first)."""
    return engine.closed or (session is not None and session.closed)


async def _ended_early(
    settings: HTTPSettings,
    stream: ResponseStream,
    engine: Engine[Any],
    request_id: int | str,
    receive: Receive,
    send: Send,
    form: ReplyForm,
    session: LegacyHTTPSession | None,
    extra: list[tuple[bytes, bytes]] | None,
) -> None:
    """The server closed the request's stream before its answer was sent.

    Its session ended (DELETE, idle expiry, shutdown): a 404 under the request's
    id, what any later request in that session gets, so the client starts a new
    one (2025-11-25 transports, "Session Management") instead of seeing the
    connection end with no response at all. Otherwise the handler asked for SSE
    polling (``Context.close_sse_stream``): an SSE response holding just the
    priming event, from which the client resumes with ``Last-Event-ID``.
    """
    if stream.finished:
        # Its handler ended with no answer (cancelled): none is due, nothing to resume.
        await respond(send, 202, headers=extra or ())
        return
    if _ended(engine, session) or session is None or not form.sse:
        await jsonrpc_error(send, 404, request_id, INVALID_REQUEST, "Session not found")
        return
    await pump_sse(
        send,
        receive,
        stream,
        first=None,
        resumable=True,
        retry_ms=settings.sse_retry_ms,
        keepalive=settings.keepalive_interval,
        on_disconnect=lambda: None,
        extra_headers=extra,
    )


async def json_answer(
    send: Send, item: StreamItem, modern: bool, extra: Iterable[tuple[bytes, bytes]] | None
) -> None:
    """The answer as a JSON body; an error answer's status follows its code and the era."""
    error = item.error
    if error is None:
        await respond(send, 200, item.data, headers=extra or ())
        return
    status = h.status_for_error(error.code, modern=modern, data=error.data)
    headers = [*(extra or ()), *h.error_headers(error.code, error.data)]
    await respond(send, status, item.data, headers=headers)


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
