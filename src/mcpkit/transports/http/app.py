"""The Streamable HTTP server: one ASGI app, one endpoint, both eras.

How a POST is classified (2026-07-28 basic/versioning, "Backward Compatibility"):

- a modern ``MCP-Protocol-Version`` header or a ``_meta`` protocol version in the
  body: modern, stateless; ``Mcp-Session-Id`` is ignored;
- an ``Mcp-Session-Id``, or ``initialize``: legacy, in that session;
- anything else is judged as modern, so it gets the modern errors (400/404).

Every route checks Host and Origin first (DNS rebinding), then the app's
limits: body size, body deadline, queue bounds, session cap.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import msgspec
from msgspec import UNSET

from ...protocol import http as h
from ...protocol import jsonrpc
from ...protocol.errors import INVALID_PARAMS, INVALID_REQUEST, MCPError, ProtocolError
from ...protocol.framing import Oversized
from ...protocol.jsonrpc import ErrorResponse, Notification, Request, Response
from ...protocol.lifecycle import LEGACY_ONLY_METHODS
from ...protocol.versions import ProtocolVersion, parse_version
from ...server.auth import Authenticator, AuthError, Principal
from .asgi import HTTPFailure, Receive, Scope, Send, headers_of, read_body, respond
from .principal import current_principal
from .sessions import HTTPSession, InMemorySessionStore, SessionStore, new_session_id
from .streams import ResponseStream, StreamItem, pump_sse

if TYPE_CHECKING:
    from ...server.app import MCPServer
    from ...session.engine import Session

__all__ = ["HTTPSettings", "StreamableHTTPApp"]

logger = logging.getLogger("mcpkit.http")

_JSON = b"application/json"
_principal = current_principal
#: The endpoint URL the current request's token must be meant for.
_resource: contextvars.ContextVar[str] = contextvars.ContextVar("mcpkit_resource", default="")
_PRM_PATH = "/.well-known/oauth-protected-resource"


@dataclass
class HTTPSettings:
    """Every limit and switch of the HTTP transport, with safe defaults."""

    #: The MCP endpoint.
    path: str = "/mcp"
    #: True: answer every request as JSON; False: always SSE; None: JSON unless
    #: the handler sends something before its result (then SSE).
    json_response: bool | None = None
    #: Legacy era without sessions (for scaled-out deployments).
    stateless: bool = False
    #: The address served; a loopback bind restricts Host and Origin to loopback names.
    host: str = "127.0.0.1"
    allowed_hosts: list[str] | None = None
    allowed_origins: list[str] | None = None
    max_body_bytes: int = 4 * 1024 * 1024
    #: Deadline for receiving a request body (slow-body defence).
    body_timeout: float = 30.0
    #: Messages a stream may hold for a slow reader before it is cut off.
    stream_queue_limit: int = 1024
    #: Legacy events kept per stream for Last-Event-ID resumption.
    replay_events: int = 1024
    sse_retry_ms: int = 1000
    keepalive_interval: float = 15.0
    session_idle_timeout: float = 3600.0
    max_sessions: int = 10_000
    #: On shutdown, how long in-flight requests may take to finish.
    shutdown_grace: float = 30.0
    session_store: SessionStore = field(default_factory=InMemorySessionStore)
    #: Legacy HTTP+SSE (2024-11-05) endpoints; None disables them.
    sse_path: str | None = "/sse"
    message_path: str = "/messages/"
    #: An OAuth resource server (e.g. ``mcpkit.auth.server``): every MCP route
    #: then needs a valid bearer token, and the protected-resource metadata is served.
    auth: Authenticator | None = None
    #: The canonical URL of the endpoint, tokens' audience; by default from the request.
    resource_url: str | None = None


class _SingleChannel:
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


class _ParamsPeek(msgspec.Struct):
    meta: dict[str, Any] | msgspec.UnsetType = msgspec.field(default=UNSET, name="_meta")


_peek = msgspec.json.Decoder(_ParamsPeek)
_any = msgspec.json.Decoder()


class StreamableHTTPApp:
    """ASGI app serving an :class:`MCPServer` over Streamable HTTP (and legacy HTTP+SSE)."""

    def __init__(self, server: MCPServer, settings: HTTPSettings | None = None) -> None:
        self.server = server
        self.settings = settings = settings or HTTPSettings()
        self.policy = h.OriginPolicy(settings.host, settings.allowed_hosts, settings.allowed_origins)
        if settings.auth is not None and settings.resource_url is None and self.policy.any_host:
            # The audience would come from whatever Host a caller sends: a token minted
            # for another server could pass. Refuse rather than guess.
            raise ValueError(
                "HTTP auth on a non-loopback bind needs resource_url= (the endpoint's canonical URL) "
                "or allowed_hosts="
            )
        self.sessions = settings.session_store
        self.draining = False
        self.in_flight = 0
        self._idle = asyncio.Event()
        self._reaper: asyncio.Task[None] | None = None
        self._lifespan: contextlib.AbstractAsyncContextManager[Any] | None = None
        from .legacy_sse import LegacySSE

        self.legacy_sse = LegacySSE(self) if settings.sse_path else None

    # -- ASGI ----------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "lifespan":
            await self._run_lifespan(receive, send)
            return
        if kind != "http":
            return
        headers = headers_of(scope)
        try:
            self._guard(headers)
            if self.draining:
                raise HTTPFailure(503, "server is shutting down", headers=[(b"retry-after", b"5")])
            self._ensure_reaper()
            self.in_flight += 1
            self._idle.clear()
            try:
                await self._route(scope, receive, send, headers)
            finally:
                self.in_flight -= 1
                if self.in_flight == 0:
                    self._idle.set()
        except HTTPFailure as failure:
            await _fail(send, failure)

    def _guard(self, headers: dict[str, str]) -> None:
        host = headers.get("host")
        if not self.policy.host_allowed(host):
            # 421: the request was not meant for this server (DNS rebinding).
            raise HTTPFailure(421, f"Host {host!r} is not allowed")
        if not self.policy.origin_allowed(headers.get("origin"), host):
            raise HTTPFailure(403, "Origin is not allowed")

    async def _route(self, scope: Scope, receive: Receive, send: Send, headers: dict[str, str]) -> None:
        path = _route_path(scope)
        method = scope["method"]
        auth = self.settings.auth
        if auth is not None:
            if path.startswith(_PRM_PATH):
                await self._resource_metadata(path, method, scope, headers, send)
                return
            _resource.set(self.resource_url(scope, headers))
            _principal.set(await self._authenticate(auth, scope, headers))
        if path == self.settings.path or path == self.settings.path.rstrip("/") + "/":
            if method == "POST":
                await self._post(receive, send, headers)
            elif method == "GET":
                await self._get(receive, send, headers)
            elif method == "DELETE":
                await self._delete(send, headers)
            else:
                raise HTTPFailure(405, "method not allowed", headers=[(b"allow", b"GET, POST, DELETE")])
            return
        if self.legacy_sse is not None and await self.legacy_sse.route(
            path, method, scope, receive, send, headers
        ):
            return
        raise HTTPFailure(404, "not found")

    # -- authorization -------------------------------------------------------

    def _session_for(self, session_id: str) -> HTTPSession | None:
        """The session, if it exists and belongs to this caller.

        A session created by one principal is invisible to every other: the
        same 404 as an unknown id, so ids cannot be probed (CVE-2026-52869).
        """
        session = self.sessions.get(session_id)
        if session is None:
            return None
        principal = _principal.get()
        if session.principal != (principal.key if principal is not None else None):
            return None
        return session

    def resource_url(self, scope: Scope, headers: dict[str, str]) -> str:
        """The endpoint's canonical URL (the tokens' audience)."""
        if self.settings.resource_url is not None:
            return self.settings.resource_url
        scheme = scope.get("scheme", "http")
        host = headers.get("host", "localhost")
        return f"{scheme}://{host}{scope.get('root_path', '')}{self.settings.path}"

    async def _authenticate(self, auth: Authenticator, scope: Scope, headers: dict[str, str]) -> Principal:
        try:
            return await auth.authenticate(headers.get("authorization"), self.resource_url(scope, headers))
        except AuthError as exc:
            raise _auth_failure(exc) from None

    async def _resource_metadata(
        self, path: str, method: str, scope: Scope, headers: dict[str, str], send: Send
    ) -> None:
        """RFC 9728 metadata, at the path-based URL and at the root (both are probed)."""
        if method != "GET":
            raise HTTPFailure(405, "method not allowed", headers=[(b"allow", b"GET")])
        suffix = path[len(_PRM_PATH) :]
        if suffix not in ("", "/", self.settings.path):
            raise HTTPFailure(404, "not found")
        assert self.settings.auth is not None
        document = self.settings.auth.metadata(self.resource_url(scope, headers))
        await respond(send, 200, msgspec.json.encode(document), headers=[(b"cache-control", b"max-age=300")])

    def _check_scopes(self, principal: Principal | None, method: str, params: Any) -> None:
        """403 insufficient_scope before dispatch when the target needs more scopes."""
        auth = self.settings.auth
        if auth is None or principal is None or not isinstance(params, dict):
            return
        required = self.server.required_scopes(method, params)
        if required and not required <= principal.scopes:
            raise _auth_failure(auth.insufficient_scope(required, _resource.get()))

    # -- POST ----------------------------------------------------------------

    async def _post(self, receive: Receive, send: Send, headers: dict[str, str]) -> None:
        ctype = headers.get("content-type", "")
        if ctype.split(";", 1)[0].strip().lower() != "application/json":
            raise HTTPFailure(415, "Content-Type must be application/json")
        json_ok, sse_ok = _accepts(headers.get("accept"))
        if not (json_ok or sse_ok):
            raise HTTPFailure(406, "Accept must include application/json or text/event-stream")
        body = await read_body(receive, headers, self.settings.max_body_bytes, self.settings.body_timeout)
        try:
            message = jsonrpc.decode_message(body, allow_batch=True)
        except ProtocolError as exc:
            await _jsonrpc_error(send, 400, exc.request_id, exc.code, exc.message)
            return
        version = parse_version(headers.get(h.PROTOCOL_VERSION, "").strip())
        if isinstance(message, list):
            await self._post_batch(message, receive, send, headers, version)
            return
        meta = self._meta_of(message)
        session_id = headers.get(h.SESSION_ID)
        if (version is not None and version.is_modern) or (
            session_id is None
            and not _is_initialize(message)
            and (meta is not None or not self._legacy_stateless)
        ):
            await self._post_modern(message, meta, receive, send, headers, json_ok, sse_ok)
        else:
            await self._post_legacy(message, receive, send, headers, version, json_ok, sse_ok)

    @property
    def _legacy_stateless(self) -> bool:
        return self.settings.stateless

    @staticmethod
    def _meta_of(message: jsonrpc.Message) -> dict[str, Any] | None:
        if not isinstance(message, Request | Notification) or message.params is None:
            return None
        try:
            peek = _peek.decode(message.params)
        except msgspec.DecodeError:
            return None
        if peek.meta is UNSET or "io.modelcontextprotocol/protocolVersion" not in peek.meta:
            return None
        return peek.meta

    async def _post_modern(
        self,
        message: jsonrpc.Message,
        meta: dict[str, Any] | None,
        receive: Receive,
        send: Send,
        headers: dict[str, str],
        json_ok: bool,
        sse_ok: bool,
    ) -> None:
        if isinstance(message, Notification):
            await respond(send, 202)  # no client notifications are defined for modern HTTP
            return
        if not isinstance(message, Request):
            await _jsonrpc_error(
                send, 400, None, INVALID_REQUEST, "Invalid Request: clients must not POST responses"
            )
            return
        try:
            params = _any.decode(message.params) if message.params is not None else {}
            tool_headers = self._tool_headers(message.method, params)
            h.validate_modern_headers(headers, message.method, params, tool_headers)
            if message.method in LEGACY_ONLY_METHODS:
                # Removed in 2026-07-28 (initialize included: this request is modern).
                raise MCPError.method_not_found(message.method)
            self._check_scopes(_principal.get(), message.method, params)
        except MCPError as exc:
            await _jsonrpc_error(
                send, h.status_for_error(exc.code, modern=True), message.id, exc.code, exc.message
            )
            return
        except msgspec.DecodeError as exc:
            await _jsonrpc_error(send, 400, message.id, INVALID_PARAMS, f"Invalid params: {exc}")
            return
        stream = ResponseStream("m", message.id, self.settings.stream_queue_limit)
        engine = self.server.connect(_SingleChannel(stream), stateless=True)
        engine.dispatcher.principal = _principal.get()  # type: ignore[attr-defined]
        engine.feed_message(message)
        await self._answer(stream, engine, message.id, receive, send, json_ok, sse_ok, modern=True)

    def _tool_headers(self, method: str, params: Any) -> dict[str, tuple[str, ...]] | None:
        if method != "tools/call" or not isinstance(params, dict):
            return None
        tool = self.server._tools.tools.get(params.get("name"))  # type: ignore[arg-type]
        return tool.header_params if tool is not None else None

    async def _post_legacy(
        self,
        message: jsonrpc.Message,
        receive: Receive,
        send: Send,
        headers: dict[str, str],
        version: ProtocolVersion | None,
        json_ok: bool,
        sse_ok: bool,
    ) -> None:
        if h.PROTOCOL_VERSION in headers and (version is None or version not in self.server.versions):
            # 2025-06-18+: an invalid or unsupported MCP-Protocol-Version is a 400.
            await _jsonrpc_error(
                send,
                400,
                _id_of(message),
                INVALID_REQUEST,
                f"Unsupported MCP-Protocol-Version: {headers[h.PROTOCOL_VERSION]!r}",
            )
            return
        if self.settings.stateless:
            await self._post_stateless_legacy(message, receive, send, version, json_ok, sse_ok)
            return
        session_id = headers.get(h.SESSION_ID)
        extra: list[tuple[bytes, bytes]] = []
        if session_id is None:
            # Only initialize reaches here without a session (see _post).
            sse_sessions = len(self.legacy_sse.sessions) if self.legacy_sse is not None else 0
            if len(self.sessions) + sse_sessions >= self.settings.max_sessions:
                raise HTTPFailure(503, "too many sessions", headers=[(b"retry-after", b"5")])
            principal = _principal.get()
            session = HTTPSession(
                self.server,
                new_session_id(),
                self.settings.stream_queue_limit,
                self.settings.replay_events,
                principal=principal.key if principal is not None else None,
            )
            self.sessions.add(session)
            extra.append((b"mcp-session-id", session.id.encode()))
        else:
            found = self._session_for(session_id)
            if found is None:
                await _jsonrpc_error(send, 404, _id_of(message), INVALID_REQUEST, "Session not found")
                return
            session = found
            if isinstance(message, Request) and message.method == "initialize":
                await _jsonrpc_error(send, 400, message.id, INVALID_REQUEST, "Session already initialized")
                return
        session.touch()
        session.conn.principal = _principal.get()  # the latest token's scopes (step-up)
        if not isinstance(message, Request):
            session.engine.feed_message(message)
            await respond(send, 202, headers=extra)
            return
        if self.settings.auth is not None and message.params is not None:
            with contextlib.suppress(msgspec.DecodeError):
                self._check_scopes(_principal.get(), message.method, _any.decode(message.params))
        if message.id in session.request_streams or session.engine.in_flight(message.id):
            await _jsonrpc_error(
                send, 200, message.id, INVALID_REQUEST, f"id {message.id!r} is already in use"
            )
            return
        stream = session.open_stream(message.id)
        session.engine.feed_message(message)
        try:
            await self._answer(
                stream,
                session.engine,
                message.id,
                receive,
                send,
                json_ok,
                sse_ok,
                modern=False,
                session=session,
                extra=extra,
            )
        finally:
            # Idle time counts from the end of the last activity, not its start.
            session.touch()
            if stream.finished and not stream.queue:
                session.forget_stream(stream)

    async def _post_stateless_legacy(
        self,
        message: jsonrpc.Message,
        receive: Receive,
        send: Send,
        version: ProtocolVersion | None,
        json_ok: bool,
        sse_ok: bool,
    ) -> None:
        if not isinstance(message, Request):
            await respond(send, 202)
            return
        stream = ResponseStream("s", message.id, self.settings.stream_queue_limit)
        engine = self.server.connect(_SingleChannel(stream), stateless=True)
        if message.method != "initialize":
            # No session to remember a handshake: the header says the revision
            # (2025-03-26 when absent, streamable-http "Protocol Version Header").
            engine.dispatcher.lifecycle.assume(version or ProtocolVersion.V2025_03_26)  # type: ignore[attr-defined]
        engine.feed_message(message)
        await self._answer(stream, engine, message.id, receive, send, json_ok, sse_ok, modern=False)

    async def _post_batch(
        self,
        items: list[msgspec.Raw],
        receive: Receive,
        send: Send,
        headers: dict[str, str],
        version: ProtocolVersion | None,
    ) -> None:
        """JSON-RPC batches: 2025-03-26 sessions only, answered as one JSON array."""
        session = self._session_for(headers.get(h.SESSION_ID, ""))
        if session is None or session.conn.lifecycle.version is not ProtocolVersion.V2025_03_26:
            await _jsonrpc_error(
                send, 400, None, INVALID_REQUEST, "Invalid Request: batches are not accepted"
            )
            return
        session.touch()
        streams: list[ResponseStream] = []
        answers: list[bytes] = []
        for raw in items:
            try:
                message = jsonrpc.decode_message(raw)
            except ProtocolError as exc:
                answers.append(jsonrpc.encode_error(exc.request_id, exc.code, exc.message))
                continue
            if isinstance(message, Request):
                if message.method == "initialize":
                    answers.append(
                        jsonrpc.encode_error(message.id, INVALID_REQUEST, "initialize must not be batched")
                    )
                    continue
                streams.append(session.open_stream(message.id))
            session.engine.feed_message(message)  # type: ignore[arg-type]
        for stream in streams:
            while True:
                item = await stream.get()
                if item is None or item.final:
                    break
            if item is not None:
                answers.append(item.data)
            session.forget_stream(stream)
        if not answers:
            await respond(send, 202)
            return
        await respond(send, 200, b"[" + b",".join(answers) + b"]")

    # -- answering a request ---------------------------------------------------

    async def _answer(
        self,
        stream: ResponseStream,
        engine: Session,
        request_id: int | str,
        receive: Receive,
        send: Send,
        json_ok: bool,
        sse_ok: bool,
        *,
        modern: bool,
        session: HTTPSession | None = None,
        extra: list[tuple[bytes, bytes]] | None = None,
    ) -> None:
        """Send the request's answer as JSON when it is ready first, else as SSE."""
        mode = self.settings.json_response
        want_json = json_ok and mode is not False
        want_sse = sse_ok and mode is not True
        first = stream.ready()
        if first is None:
            first = await self._first(stream, engine, request_id, receive, modern, want_sse)
            if first is None:
                return  # the client went away
        if first.final and want_json:
            await _json_answer(send, first.data, modern, extra)
            return
        if not want_sse:
            # JSON only: what came before the result has nowhere to go in this era's
            # rules (legacy: it already went to the GET stream; modern: dropped).
            item: StreamItem | None = first
            while item is not None and not item.final:
                item = await stream.get()
            if item is not None:
                await _json_answer(send, item.data, modern, extra)
            return
        resumable = session is not None

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
            retry_ms=self.settings.sse_retry_ms,
            keepalive=self.settings.keepalive_interval,
            on_disconnect=disconnected,
            extra_headers=extra,
        )

    async def _first(
        self,
        stream: ResponseStream,
        engine: Session,
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

    # -- GET and DELETE (legacy sessions) ----------------------------------------

    async def _get(self, receive: Receive, send: Send, headers: dict[str, str]) -> None:
        session_id = headers.get(h.SESSION_ID)
        version = parse_version(headers.get(h.PROTOCOL_VERSION, "").strip())
        if session_id is None or (version is not None and version.is_modern) or self.settings.stateless:
            # 2026-07-28: GET is not part of the modern transport.
            raise HTTPFailure(405, "GET needs a legacy session", headers=[(b"allow", b"POST")])
        if "text/event-stream" not in headers.get("accept", "") and "*/*" not in headers.get("accept", ""):
            raise HTTPFailure(406, "Accept must include text/event-stream")
        session = self._session_for(session_id)
        if session is None:
            raise HTTPFailure(404, "Session not found")
        session.touch()
        last = headers.get(h.LAST_EVENT_ID)
        if last is not None:
            found = session.find_stream(last.strip())
            if found is None:
                raise HTTPFailure(404, "unknown Last-Event-ID")
            stream, seq = found
            stream.reopen(seq)
            try:
                await self._stream_out(send, receive, session, stream)
            finally:
                session.touch()
            return
        standalone = session.standalone
        if session.get_connected:
            raise HTTPFailure(409, "a GET stream is already open for this session")
        standalone.reopen(standalone.seq)  # backlog for the GET stream is dropped
        session.get_connected = True
        try:
            await self._stream_out(send, receive, session, standalone)
        finally:
            session.get_connected = False
            session.touch()

    async def _stream_out(
        self, send: Send, receive: Receive, session: HTTPSession, stream: ResponseStream
    ) -> None:
        await pump_sse(
            send,
            receive,
            stream,
            first=None,
            resumable=True,
            retry_ms=self.settings.sse_retry_ms,
            keepalive=self.settings.keepalive_interval,
            on_disconnect=lambda: None,
        )
        if stream.finished and not stream.queue and stream is not session.standalone:
            session.forget_stream(stream)

    async def _delete(self, send: Send, headers: dict[str, str]) -> None:
        session_id = headers.get(h.SESSION_ID)
        if session_id is None or self.settings.stateless:
            raise HTTPFailure(405, "DELETE needs a legacy session", headers=[(b"allow", b"POST")])
        session = self._session_for(session_id)
        if session is None:
            raise HTTPFailure(404, "Session not found")
        self.sessions.remove(session_id)
        await session.close()
        await respond(send, 200)

    # -- lifetime ------------------------------------------------------------------

    def _ensure_reaper(self) -> None:
        if self._reaper is None or self._reaper.done():
            self._reaper = asyncio.ensure_future(self._reap())

    async def _reap(self) -> None:
        """Evict sessions idle longer than the timeout (their memory goes with them)."""
        timeout = self.settings.session_idle_timeout
        while True:
            await asyncio.sleep(max(0.05, min(timeout / 4, 30.0)))
            await self.evict_idle()

    async def evict_idle(self) -> int:
        cutoff = time.monotonic() - self.settings.session_idle_timeout
        evicted = 0
        for session in self.sessions:
            if session.last_seen < cutoff and not session.get_connected and not session.engine._in_flight:
                self.sessions.remove(session.id)
                await session.close()
                evicted += 1
        return evicted

    async def _run_lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    await self.startup()
                except Exception as exc:
                    await send({"type": "lifespan.startup.failed", "message": str(exc)})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.shutdown()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def startup(self) -> None:
        """Enter the server's lifespan hook (mounted apps: call from the parent's lifespan)."""
        self._lifespan = self.server.running()
        await self._lifespan.__aenter__()
        self._ensure_reaper()

    async def drain(self, grace: float | None = None) -> None:
        """Refuse new requests (503), end subscriptions and GET streams, and wait
        up to ``grace`` seconds for in-flight requests to finish."""
        self.draining = True
        self.server.stopping.set()
        for session in self.sessions:
            session.standalone.close()
        if self.legacy_sse is not None:
            await self.legacy_sse.drain()
        if self.in_flight:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.settings.shutdown_grace if grace is None else grace):
                    await self._idle.wait()

    async def shutdown(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
        close_auth = getattr(self.settings.auth, "aclose", None)
        if close_auth is not None:
            await close_auth()
        for session in self.sessions:
            self.sessions.remove(session.id)
            await session.close()
        if self._lifespan is not None:
            await self._lifespan.__aexit__(None, None, None)
            self._lifespan = None


# -- helpers --------------------------------------------------------------------------


def _auth_failure(exc: AuthError) -> HTTPFailure:
    return HTTPFailure(
        exc.status, exc.message, headers=[(b"www-authenticate", exc.www_authenticate.encode())]
    )


def _route_path(scope: Scope) -> str:
    path: str = scope.get("path", "/")
    root: str = scope.get("root_path", "")
    if root and path.startswith(root):
        path = path[len(root) :] or "/"
    return path


def _accepts(accept: str | None) -> tuple[bool, bool]:
    if not accept:
        return True, False
    value = accept.lower()
    anything = "*/*" in value
    return anything or "application/json" in value, anything or "text/event-stream" in value


def _is_initialize(message: jsonrpc.Message) -> bool:
    return isinstance(message, Request) and message.method == "initialize"


def _id_of(message: jsonrpc.Message) -> int | str | None:
    return message.id if isinstance(message, Request | Response | ErrorResponse) else None


def _error_code(data: bytes) -> int | None:
    if data.find(b'"result":') != -1:
        return None
    try:
        code = _any.decode(data)["error"]["code"]
    except (msgspec.DecodeError, KeyError, TypeError):
        return None
    return code if isinstance(code, int) else None


async def _json_answer(
    send: Send, data: bytes, modern: bool, extra: Iterable[tuple[bytes, bytes]] | None
) -> None:
    code = _error_code(data)
    status = 200 if code is None else h.status_for_error(code, modern=modern)
    await respond(send, status, data, headers=extra or ())


async def _jsonrpc_error(
    send: Send, status: int, request_id: int | str | None, code: int, message: str
) -> None:
    await respond(send, status, jsonrpc.encode_error(request_id, code, message))


async def _fail(send: Send, failure: HTTPFailure) -> None:
    body = failure.body
    if body is None:
        body = jsonrpc.encode_error(None, INVALID_REQUEST, failure.message)
    with contextlib.suppress(Exception):
        await respond(send, failure.status, body, headers=failure.headers)
