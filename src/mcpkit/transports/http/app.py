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
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import msgspec
from msgspec import UNSET

from ...protocol import http as h
from ...protocol import jsonrpc
from ...protocol.auth import Authenticator, AuthError, Principal
from ...protocol.errors import INTERNAL_ERROR, INVALID_REQUEST, MCPError, ProtocolError
from ...protocol.jsonrpc import Notification, Request
from ...protocol.lifecycle import LEGACY_ONLY_METHODS
from ...protocol.meta import PROTOCOL_VERSION as PROTOCOL_VERSION_META
from ...protocol.requests import ServerRequest, decode_request
from ...protocol.versions import parse_version
from ...scale.errors import RedisUnavailable
from .answer import ReplyForm, SingleChannel, answer, fail, jsonrpc_error
from .asgi import HTTPFailure, Receive, Scope, Send, headers_of, read_body, respond
from .contract import ServedApp
from .legacy_routes import LegacyRoutes
from .lifetime import Lifetime
from .principal import current_principal
from .settings import HTTPSettings
from .streams import ResponseStream

if TYPE_CHECKING:
    from .shared import SharedSessionStore

__all__ = ["HTTPSettings", "StreamableHTTPApp"]

logger = logging.getLogger("mcpkit.http")

_JSON = b"application/json"
_principal = current_principal
#: The endpoint URL the current request's token must be meant for.
_resource: contextvars.ContextVar[str] = contextvars.ContextVar("mcpkit_resource", default="")
_PRM_PATH = "/.well-known/oauth-protected-resource"


class _ParamsPeek(msgspec.Struct):
    meta: dict[str, Any] | msgspec.UnsetType = msgspec.field(default=UNSET, name="_meta")


_peek = msgspec.json.Decoder(_ParamsPeek)

_PROBE_METHODS = frozenset({"GET", "HEAD"})
_OK = b'{"status":"ok"}'
_DRAINING = b'{"status":"draining"}'
_REDIS_DOWN = b'{"status":"redis unavailable"}'
_REDIS_BEHIND = b'{"status":"redis overloaded"}'
_PROBE_HEADERS = [(b"cache-control", b"no-store")]


class StreamableHTTPApp(Lifetime, LegacyRoutes):
    """ASGI app serving an :class:`ServedApp` over Streamable HTTP (and legacy HTTP+SSE)."""

    def __init__(self, server: ServedApp, settings: HTTPSettings | None = None) -> None:
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
        #: Sessions, streams and changes shared with other workers (Redis), or None.
        self.shared: SharedSessionStore | None = None
        if settings.redis_url:
            from .shared import SharedSessionStore

            self.shared = SharedSessionStore(self, settings.redis_url, settings.redis_prefix)
            # Workers sharing sessions must share tasks too (an MCPServer's TaskManager).
            tasks = getattr(server, "tasks", None)
            if tasks is not None:
                tasks.share_with(settings.redis_url, settings.redis_prefix)

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
            # Probes come before draining, Redis and authentication (see _probe).
            if scope["method"] in _PROBE_METHODS and await self._probe(scope, send):
                return
            if self.draining:
                raise HTTPFailure(503, "server is shutting down", headers=[(b"retry-after", b"5")])
            self._ensure_reaper()
            if self.shared is not None:
                await self.shared.start()
                if self.shared.backend.overloaded:
                    raise HTTPFailure(
                        503, "Redis is not keeping up; try again", headers=[(b"retry-after", b"1")]
                    )
            self.in_flight += 1
            self._idle.clear()
            try:
                await self._route(scope, receive, send, headers)
            except RedisUnavailable as exc:
                # Legacy sessions live in Redis: without it they cannot be served
                # (modern stateless requests do not need it and go on working).
                body = jsonrpc.encode_error(None, INTERNAL_ERROR, str(exc))
                raise HTTPFailure(503, str(exc), headers=[(b"retry-after", b"1")], body=body) from None
            finally:
                self.in_flight -= 1
                if self.in_flight == 0:
                    self._idle.set()
        except HTTPFailure as failure:
            await fail(send, failure)

    def _guard(self, headers: dict[str, str]) -> None:
        host = headers.get("host")
        if not self.policy.host_allowed(host):
            # 421: the request was not meant for this server (DNS rebinding).
            raise HTTPFailure(421, f"Host {host!r} is not allowed")
        if not self.policy.origin_allowed(headers.get("origin"), host):
            raise HTTPFailure(403, "Origin is not allowed")

    # -- health probes ---------------------------------------------------------
    #
    # ``GET health_path`` (liveness) and ``GET ready_path`` (readiness) answer
    # before the drain check, Redis and authentication: a load balancer has no
    # token, and must see "draining" rather than a refusal. They come after the
    # Host/Origin guard on purpose: the guard is the DNS-rebinding defence and
    # exempting any path from it would be a new rule to audit. Probes that reach
    # the server by IP work unchanged with the defaults (a non-loopback bind
    # accepts any Host); with ``allowed_hosts`` set, the probe sends an allowed
    # Host header (Kubernetes ``httpGet.httpHeaders``, ``curl -H``) or the
    # address it probes is listed. A probe costs no Redis round trip: readiness
    # reads the Redis connection's own state (its pub/sub listener, which
    # notices a lost Redis at once and reconnects by itself) and its backlog.

    async def _probe(self, scope: Scope, send: Send) -> bool:
        """Answer a health probe; False when the path is not one."""
        settings = self.settings
        path = _route_path(scope)
        if path == settings.health_path:
            status, body = 200, _OK
        elif path == settings.ready_path:
            status, body = await self._readiness()
        else:
            return False
        # (HEAD: the server drops the body and keeps the headers, as for GET.)
        await respond(send, status, body, headers=_PROBE_HEADERS)
        return True

    async def _readiness(self) -> tuple[int, bytes]:
        """200, or 503 with why this worker should get no new traffic."""
        if self.draining:
            return 503, _DRAINING
        shared = self.shared
        if shared is not None:
            backend = shared.backend
            if not backend.started:  # mounted without the lifespan: the first probe connects
                await shared.start()
            if not backend.listening:
                return 503, _REDIS_DOWN
            if backend.overloaded:
                return 503, _REDIS_BEHIND
        return 200, _OK

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
                await self._post(scope, receive, send, headers)
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

    def _check_scopes(self, request: ServerRequest) -> None:
        """403 insufficient_scope before dispatch when the target needs more scopes."""
        auth = self.settings.auth
        principal = request.principal
        if auth is None or principal is None:  # no authenticator: nothing to check
            return
        required = self.server.required_scopes(request.method, request.target)
        if required and not required <= principal.scopes:
            raise _auth_failure(auth.insufficient_scope(required, _resource.get()))

    def _check_batch_scopes(self, requests: Sequence[ServerRequest]) -> None:
        """:meth:`_check_scopes` for the requests of a batch at once: one 403 naming the
        union of the scopes they need (2025-11-25 authorization, "Runtime Insufficient
        Scope Errors": the scopes to satisfy the current request), so the client steps
        up once, not once per item."""
        auth = self.settings.auth
        principal = _principal.get()
        if auth is None or principal is None:
            return
        needed: frozenset[str] = frozenset()
        for request in requests:
            needed |= self.server.required_scopes(request.method, request.target)
        if needed and not needed <= principal.scopes:
            raise _auth_failure(auth.insufficient_scope(needed, _resource.get()))

    # -- POST ----------------------------------------------------------------
    #
    # The body is decoded once: the envelope here, the params by decode_request
    # into a ServerRequest, which routing, header validation and scope checks
    # read, and which the engine then serves as it is (Engine.submit).

    async def _post(self, scope: Scope, receive: Receive, send: Send, headers: dict[str, str]) -> None:
        ctype = headers.get("content-type", "")
        if ctype.split(";", 1)[0].strip().lower() != "application/json":
            raise HTTPFailure(415, "Content-Type must be application/json")
        form = ReplyForm.negotiate(headers.get("accept"), self.settings.json_response, modern=False)
        if form is None:
            raise HTTPFailure(406, "Accept must include application/json or text/event-stream")
        body = await read_body(receive, headers, self.settings.max_body_bytes, self.settings.body_timeout)
        try:
            message = jsonrpc.decode_message(body, allow_batch=True)
        except ProtocolError as exc:
            await jsonrpc_error(send, 400, exc.request_id, exc.code, exc.message)
            return
        version = parse_version(headers.get(h.PROTOCOL_VERSION, "").strip())
        if isinstance(message, list):
            await self._post_batch(message, receive, send, headers, form)
            return
        request: ServerRequest | None = None
        if isinstance(message, Request):
            request = decode_request(message, _principal.get(), "http")
            request.peer = _peer(scope)
            meta = request.meta
        else:
            meta = _notification_meta(message)
        session_id = headers.get(h.SESSION_ID)
        if (version is not None and version.is_modern) or (
            session_id is None
            and not _is_initialize(message)
            and ((meta is not None and PROTOCOL_VERSION_META in meta) or not self.settings.stateless)
        ):
            await self._post_modern(message, request, receive, send, headers, form.era(modern=True))
        else:
            await self._post_legacy(message, request, receive, send, headers, version, form)

    async def _post_modern(
        self,
        message: jsonrpc.Message,
        request: ServerRequest | None,
        receive: Receive,
        send: Send,
        headers: dict[str, str],
        form: ReplyForm,
    ) -> None:
        if isinstance(message, Notification):
            await respond(send, 202)  # no client notifications are defined for modern HTTP
            return
        if request is None:
            await jsonrpc_error(
                send, 400, None, INVALID_REQUEST, "Invalid Request: clients must not POST responses"
            )
            return
        try:
            target = request.target
            tool_headers = (
                self.server.tool_header_params(target)
                if request.method == "tools/call" and target is not None
                else None
            )
            h.validate_modern_headers(
                headers, request.method, request.meta, target, request.arguments, tool_headers
            )
            if request.method in LEGACY_ONLY_METHODS:
                # Removed in 2026-07-28 (initialize included: this request is modern).
                raise MCPError.method_not_found(request.method)
            if self.settings.auth is not None:
                self._check_scopes(request)
        except MCPError as exc:
            await jsonrpc_error(
                send, h.status_for_error(exc.code, modern=True), request.id, exc.code, exc.message
            )
            return
        stream = ResponseStream("m", request.id, self.settings.stream_queue_limit)
        engine = self.server.connect(SingleChannel(stream), stateless=True, transport="http")
        engine.submit(request)
        await answer(self.settings, stream, engine, request.id, receive, send, form)


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


def _peer(scope: Scope) -> str | None:
    client = scope.get("client")
    if not client:
        return None
    host, port = client[0], client[1]
    return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"


def _notification_meta(message: jsonrpc.Message) -> dict[str, Any] | None:
    """A notification's ``_meta`` (requests are decoded whole, by decode_request)."""
    if not isinstance(message, Notification) or message.params is None:
        return None
    try:
        peek = _peek.decode(message.params)
    except msgspec.DecodeError:
        return None
    return peek.meta if peek.meta is not UNSET else None


def _is_initialize(message: jsonrpc.Message) -> bool:
    return isinstance(message, Request) and message.method == "initialize"
