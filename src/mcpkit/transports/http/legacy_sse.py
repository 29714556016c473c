"""The HTTP+SSE transport of 2024-11-05 (deprecated, still used by older clients).

``GET /sse`` opens a session whose first event, ``endpoint``, names the URL to
POST messages to; every server message then arrives on that one stream.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING
from urllib.parse import parse_qs

from ...protocol import jsonrpc
from ...protocol.errors import INVALID_REQUEST, ProtocolError
from .asgi import HTTPFailure, Receive, Scope, Send, read_body, respond
from .principal import current_principal as _principal
from .sessions import LegacyHTTPSession, new_session_id
from .streams import pump_sse

if TYPE_CHECKING:
    from .app import StreamableHTTPApp

__all__ = ["LegacySSE"]


class LegacySSE:
    def __init__(self, app: StreamableHTTPApp) -> None:
        self.app = app
        self.sessions: dict[str, LegacyHTTPSession] = {}

    async def route(
        self, path: str, method: str, scope: Scope, receive: Receive, send: Send, headers: dict[str, str]
    ) -> bool:
        settings = self.app.settings
        if path == settings.sse_path:
            if method != "GET":
                raise HTTPFailure(405, "method not allowed", headers=[(b"allow", b"GET")])
            await self._open(scope, receive, send)
            return True
        if path in (settings.message_path, settings.message_path.rstrip("/")):
            if method != "POST":
                raise HTTPFailure(405, "method not allowed", headers=[(b"allow", b"POST")])
            await self._message(scope, receive, send, headers)
            return True
        return False

    async def drain(self) -> None:
        """End every stream once its in-flight calls have answered on it."""
        sessions = list(self.sessions.values())
        grace = self.app.settings.shutdown_grace
        await asyncio.gather(*(s.engine.wait_idle(grace) for s in sessions))
        for session in sessions:
            session.standalone.close()

    async def _open(self, scope: Scope, receive: Receive, send: Send) -> None:
        settings = self.app.settings
        if len(self.sessions) + len(self.app.sessions) >= settings.max_sessions:
            raise HTTPFailure(503, "too many sessions", headers=[(b"retry-after", b"5")])
        principal = _principal.get()
        session = LegacyHTTPSession(
            self.app.server,
            new_session_id(),
            settings.stream_queue_limit,
            0,
            principal=principal.key if principal is not None else None,
            transport="sse",
            clock=settings.clock,
        )
        session.conn.principal = principal
        session.single_stream = True
        session.standalone.closed = False
        self.sessions[session.id] = session
        shared = self.app.shared
        if shared is not None:
            # Messages for this session may be POSTed to any worker: they are relayed here.
            await shared.sse_opened(session.id, session.principal)
        endpoint = f"{scope.get('root_path', '')}{settings.message_path}?session_id={session.id}"
        try:
            await pump_sse(
                send,
                receive,
                session.standalone,
                first=None,
                resumable=False,
                retry_ms=None,
                keepalive=settings.keepalive_interval,
                on_disconnect=lambda: None,
                preamble=b"event: endpoint\ndata: " + endpoint.encode() + b"\n\n",
            )
        finally:
            # The stream is the session: when it ends, so does the session.
            self.sessions.pop(session.id, None)
            if shared is not None:
                await shared.sse_closed(session.id)
            await session.close()

    async def _message(self, scope: Scope, receive: Receive, send: Send, headers: dict[str, str]) -> None:
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        session_id = (query.get("session_id") or [""])[0]
        session = self.sessions.get(session_id)
        principal = _principal.get()
        owner = principal.key if principal is not None else None
        shared = self.app.shared
        if session is None and (shared is None or not session_id):
            raise HTTPFailure(404, "Session not found")
        if session is not None and session.principal != owner:
            raise HTTPFailure(404, "Session not found")
        if headers.get("content-type", "").split(";", 1)[0].strip().lower() != "application/json":
            raise HTTPFailure(415, "Content-Type must be application/json")
        body = await read_body(
            receive, headers, self.app.settings.max_body_bytes, self.app.settings.body_timeout
        )
        if session is None:
            assert shared is not None
            try:
                jsonrpc.decode_message(body)
            except ProtocolError as exc:
                await respond(send, 400, jsonrpc.encode_error(exc.request_id, exc.code, exc.message))
                return
            if not await shared.sse_relay(session_id, owner, body):
                raise HTTPFailure(404, "Session not found")
            await respond(send, 202, b"Accepted", content_type=b"text/plain")
            return
        session.conn.principal = principal
        try:
            message = jsonrpc.decode_message(body)
        except ProtocolError as exc:
            await respond(send, 400, jsonrpc.encode_error(exc.request_id, exc.code, exc.message))
            return
        if isinstance(message, list):
            await respond(send, 400, jsonrpc.encode_error(None, INVALID_REQUEST, "batches are not accepted"))
            return
        session.touch()
        session.engine.feed_message(message)
        await respond(send, 202, b"Accepted", content_type=b"text/plain")
