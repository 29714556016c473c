"""The inspector's ASGI app: one page, its static files, and a token-guarded JSON API.

Every request is checked, in this order:

1. ``Host`` must be a loopback name (DNS rebinding) → else **421**;
2. ``Origin``, when present, must be the inspector's own origin
   (``http://127.0.0.1:PORT``, ``http://localhost:PORT`` or ``http://[::1]:PORT``) → else **403**;
3. ``/api/*`` only: the launch token, as ``Authorization: Bearer <token>`` or
   ``X-MCPKit-Token: <token>`` → else **401**; a ``Sec-Fetch-Site`` other than
   ``same-origin``/``none`` → **403**; POST bodies must be JSON (**415**) of at most
   ``max_body_bytes`` (**413**).

Nothing is spawned or connected before all of that passed. Every response
carries a strict Content-Security-Policy (no inline script, no ``eval``,
images and audio from ``data:`` only besides our own origin; frames only from our own
``/apps/frame/`` views, which are served with their own sandboxing policy, see ``_apps.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
from collections.abc import Awaitable, Callable, Mapping
from importlib import resources
from typing import Any
from urllib.parse import parse_qs

import msgspec

from ..protocol.http import LOOPBACK_HOSTS, OriginPolicy
from ..transports.http.asgi import HTTPFailure, Receive, Scope, Send, headers_of, read_body
from ._api import ApiError, parse_connect
from ._apps import AppFrames
from ._session import InspectorSession
from ._skills import SkillsView

__all__ = ["CONTENT_SECURITY_POLICY", "InspectorApp"]

logger = logging.getLogger("mcpkit.inspector")

CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "media-src 'self' data:; connect-src 'self'; font-src 'self'; object-src 'none'; "
    "frame-src 'self'; worker-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)

_SECURITY_HEADERS: list[tuple[bytes, bytes]] = [
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
]

_TYPES = {
    ".html": b"text/html; charset=utf-8",
    ".js": b"text/javascript; charset=utf-8",
    ".css": b"text/css; charset=utf-8",
    ".svg": b"image/svg+xml",
    ".png": b"image/png",
}

_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder().decode

Handler = Callable[[dict[str, Any]], Awaitable[Any]]


def _load_static() -> dict[str, tuple[bytes, bytes]]:
    """Every file in ``static/``, read once, by name (no request path touches the filesystem)."""
    files: dict[str, tuple[bytes, bytes]] = {}
    root = resources.files(__package__ or "mcpkit.inspector") / "static"
    for entry in root.iterdir():
        name = entry.name
        suffix = name[name.rfind(".") :] if "." in name else ""
        if entry.is_file() and suffix in _TYPES:
            files[name] = (entry.read_bytes(), _TYPES[suffix])
    return files


class InspectorApp:
    """ASGI app for the inspector page and API (one inspector session)."""

    def __init__(
        self,
        session: InspectorSession,
        *,
        token: str,
        bind_host: str = "127.0.0.1",
        port: int | None = None,
        max_body_bytes: int = 1024 * 1024,
        body_timeout: float = 15.0,
        keepalive_interval: float = 15.0,
    ) -> None:
        if len(token) < 16:
            raise ValueError("the inspector token must be at least 16 characters")
        self.session = session
        self.hub = session.hub
        self._token = token.encode()
        self.bind_host = bind_host
        hosts = [*LOOPBACK_HOSTS]
        if bind_host not in hosts:
            hosts.append(bind_host)
        self.policy = OriginPolicy(bind_host, allowed_hosts=hosts)
        self.port = port
        self.max_body_bytes = max_body_bytes
        self.body_timeout = body_timeout
        self.keepalive_interval = keepalive_interval
        self.closing = asyncio.Event()
        self._shutdown: asyncio.Task[None] | None = None
        #: Set once the server has run the ASGI lifespan startup.
        self.started = asyncio.Event()
        self.static = _load_static()
        #: The MCP Apps views open in the page's iframes (see ``_apps.py``).
        self.apps = AppFrames()
        #: The Skills view's routes (see ``_skills.py``).
        self.skills = SkillsView(session)
        self._routes: dict[tuple[str, str], Handler] = {
            ("POST", "/api/connect"): self._connect,
            ("POST", "/api/disconnect"): self._disconnect,
            ("POST", "/api/ping"): lambda body: self.session.ping(),
            ("POST", "/api/tools/list"): lambda body: self.session.list_tools(),
            ("POST", "/api/tools/call"): self.session.call_tool,
            ("POST", "/api/resources/list"): lambda body: self.session.list_resources(),
            ("POST", "/api/resources/templates"): lambda body: self.session.list_templates(),
            ("POST", "/api/resources/read"): self.session.read_resource,
            ("POST", "/api/resources/subscribe"): lambda body: self.session.subscribe(body, True),
            ("POST", "/api/resources/unsubscribe"): lambda body: self.session.subscribe(body, False),
            ("POST", "/api/prompts/list"): lambda body: self.session.list_prompts(),
            ("POST", "/api/prompts/get"): self.session.get_prompt,
            ("POST", "/api/complete"): self.session.complete,
            ("POST", "/api/logging/level"): self.session.set_log_level,
            ("POST", "/api/tasks/open"): self.session.open_task,
            ("POST", "/api/tasks/get"): self.session.get_task,
            ("POST", "/api/tasks/cancel"): self.session.cancel_task,
            ("POST", "/api/tasks/forget"): self._forget_task,
            ("POST", "/api/skills/list"): self.skills.list,
            ("POST", "/api/skills/get"): self.skills.get,
            ("POST", "/api/skills/read"): self.skills.read,
            ("POST", "/api/apps/open"): lambda body: self.apps.open(self.session, body),
            ("POST", "/api/apps/call"): lambda body: self.apps.call(self.session, body),
            ("POST", "/api/apps/close"): self._close_app,
            ("POST", "/api/answer"): self._answer,
            ("POST", "/api/cancel"): self._cancel,
            ("POST", "/api/clear"): self._clear,
            ("GET", "/api/state"): self._state,
            ("GET", "/api/traffic"): self._traffic,
        }
        self._api_paths = {path for _, path in self._routes} | {"/api/events"}

    # -- the guards ------------------------------------------------------------

    def own_origins(self) -> set[str]:
        """The origins the Inspector's own page is served from (loopback names, the bound port)."""
        if self.port is None:
            return set()
        names = {"127.0.0.1", "localhost", "[::1]"}
        names.add(f"[{self.bind_host}]" if ":" in self.bind_host else self.bind_host)
        return {f"http://{name}:{self.port}" for name in names}

    def origin_allowed(self, origin: str | None, host: str | None) -> bool:
        """Whether a request's ``Origin`` may use the API (only the Inspector's own page)."""
        if origin is None:
            return True  # not a browser (or a same-origin GET): the token still decides
        if self.port is None:  # port unknown (app not served by run_inspector): loopback origins
            return self.policy.origin_allowed(origin, host)
        return origin.lower().rstrip("/") in self.own_origins()

    def token_ok(self, headers: Mapping[str, str]) -> bool:
        """Whether the headers carry the access token (``Authorization: Bearer`` or ``X-Mcpkit-Token``)."""
        given: list[str] = []
        scheme, _, value = headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer":
            given.append(value.strip())
        if "x-mcpkit-token" in headers:
            given.append(headers["x-mcpkit-token"].strip())
        ok = False
        for candidate in given:
            # Constant time, and every candidate is compared (no early exit to time).
            ok |= hmac.compare_digest(candidate.encode("utf-8", "surrogateescape"), self._token)
        return ok

    # -- ASGI --------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "lifespan":
            await self._lifespan(receive, send)
            return
        if kind != "http":
            return
        headers = headers_of(scope)
        path = scope.get("path", "/")
        method = scope.get("method", "GET")
        try:
            host = headers.get("host")
            if not self.policy.host_allowed(host):
                raise ApiError(421, "Host not allowed (the inspector answers to loopback names only)")
            if not self.origin_allowed(headers.get("origin"), host):
                raise ApiError(403, "Origin not allowed")
            if path.startswith("/api/") or path == "/api":
                await self._api(path, method, scope, receive, send, headers)
            elif path.startswith("/apps/frame/"):
                await self._app_frame(path, method, headers, send)
            else:
                await self._static(path, method, send)
        except ApiError as exc:
            await _json(send, exc.status, exc.body(), _www_auth(exc.status))
        except HTTPFailure as exc:
            await _json(send, exc.status, {"error": {"message": exc.message}})

    async def _static(self, path: str, method: str, send: Send) -> None:
        if method not in ("GET", "HEAD"):
            raise ApiError(405, "method not allowed")
        name = "index.html" if path in ("/", "/index.html") else None
        if path.startswith("/static/"):
            name = path[len("/static/") :]
        found = self.static.get(name) if name else None
        if found is None or name is None or "/" in name:
            raise ApiError(404, "not found")
        body, ctype = found
        await _respond(send, 200, body if method == "GET" else b"", ctype, length=len(body))

    async def _app_frame(self, path: str, method: str, headers: Mapping[str, str], send: Send) -> None:
        """An MCP Apps view, for its sandboxed iframe only (see ``_apps.py``): its own CSP
        (``sandbox allow-scripts``, deny by default), never the page's headers."""
        if method not in ("GET", "HEAD"):
            raise ApiError(405, "method not allowed")
        frame = self.apps.get(path)
        if frame is None:
            raise ApiError(404, "not found")
        dest = headers.get("sec-fetch-dest")
        if dest is not None and dest != "iframe":
            raise ApiError(403, "an app view loads in the Inspector's iframe only")
        await send({"type": "http.response.start", "status": 200, "headers": frame.headers()})
        await send({"type": "http.response.body", "body": frame.html if method == "GET" else b""})

    async def _api(
        self, path: str, method: str, scope: Scope, receive: Receive, send: Send, headers: dict[str, str]
    ) -> None:
        # The token first: before routing, before reading a body, before anything runs.
        if not self.token_ok(headers):
            raise ApiError(401, "a valid inspector token is required")
        fetch_site = headers.get("sec-fetch-site")
        if fetch_site is not None and fetch_site not in ("same-origin", "none"):
            raise ApiError(403, "cross-site requests are not allowed")
        if path not in self._api_paths:
            raise ApiError(404, "no such API route")
        if path == "/api/events":
            if method != "GET":
                raise ApiError(405, "method not allowed")
            await self._events(scope, receive, send, headers)
            return
        handler = self._routes.get((method, path))
        if handler is None:
            raise ApiError(405, "method not allowed")
        body: dict[str, Any] = {}
        if method == "POST":
            ctype = headers.get("content-type", "").split(";", 1)[0].strip().lower()
            if ctype != "application/json":
                raise ApiError(415, "Content-Type must be application/json")
            raw = await read_body(receive, headers, self.max_body_bytes, self.body_timeout)
            if raw.strip():
                try:
                    parsed = _decode(raw)
                except msgspec.DecodeError as exc:
                    raise ApiError(400, f"invalid JSON: {exc}") from None
                if not isinstance(parsed, dict):
                    raise ApiError(400, "the body must be a JSON object")
                body = parsed
        if method == "GET":
            body = {k: v[-1] for k, v in parse_qs(scope.get("query_string", b"").decode("latin-1")).items()}
        try:
            result = await handler(body)
        except (ApiError, HTTPFailure):
            raise
        except Exception as exc:
            logger.exception("inspector API %s failed", path)
            raise ApiError(500, f"internal error: {type(exc).__name__}: {exc}") from None
        await _json(send, 200, result if result is not None else {"ok": True})

    # -- handlers ----------------------------------------------------------------

    async def _connect(self, body: dict[str, Any]) -> Any:
        spec = parse_connect(body)
        return {"server": await self.session.connect(spec)}

    async def _disconnect(self, body: dict[str, Any]) -> Any:
        await self.session.disconnect()
        return {"ok": True}

    async def _answer(self, body: dict[str, Any]) -> Any:
        self.session.answer(body)
        return {"ok": True}

    async def _forget_task(self, body: dict[str, Any]) -> Any:
        return self.session.forget_task(body)

    async def _close_app(self, body: dict[str, Any]) -> Any:
        return self.apps.close(body)

    async def _cancel(self, body: dict[str, Any]) -> Any:
        return {"cancelled": self.session.cancel(body)}

    async def _clear(self, body: dict[str, Any]) -> Any:
        self.hub.clear()
        return {"ok": True}

    async def _state(self, body: dict[str, Any]) -> Any:
        return self.session.snapshot()

    async def _traffic(self, body: dict[str, Any]) -> Any:
        try:
            since = int(body.get("since", 0))
        except (TypeError, ValueError):
            raise ApiError(400, "since must be an integer") from None
        events = self.hub.since(since, frozenset({"traffic"}))
        return msgspec.Raw(b'{"traffic":[' + b",".join(e.payload() for e in events) + b"]}")

    # -- live events (server-sent events) -----------------------------------------------

    async def _events(self, scope: Scope, receive: Receive, send: Send, headers: dict[str, str]) -> None:
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        start = headers.get("last-event-id") or (query.get("since") or ["0"])[-1]
        try:
            last = max(0, int(start))
        except ValueError:
            raise ApiError(400, "Last-Event-ID must be an integer") from None
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", b"text/event-stream; charset=utf-8"),
                    (b"x-accel-buffering", b"no"),
                    *_SECURITY_HEADERS,
                ],
            }
        )
        gone = asyncio.Event()

        async def watch() -> None:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    gone.set()
                    return

        watcher = asyncio.ensure_future(watch())
        closing = asyncio.ensure_future(self.closing.wait())
        try:
            chunk = b"retry: 1000\n\n"
            if 0 < last < self.hub.first_seq - 1:
                chunk += b"event: gap\ndata: {}\n\n"
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
            while not gone.is_set() and not self.closing.is_set():
                events = self.hub.since(last)
                if events:
                    for start_at in range(0, len(events), 256):
                        part = events[start_at : start_at + 256]
                        data = b"".join(
                            b"id: %d\nevent: %s\ndata: %s\n\n" % (e.seq, e.kind.encode(), e.payload())
                            for e in part
                        )
                        await send({"type": "http.response.body", "body": data, "more_body": True})
                    last = events[-1].seq
                    continue
                waiter = asyncio.ensure_future(self.hub.wait(last, self.keepalive_interval))
                done, _ = await asyncio.wait({waiter, watcher, closing}, return_when=asyncio.FIRST_COMPLETED)
                if waiter not in done:
                    waiter.cancel()
                elif not waiter.result():
                    await send({"type": "http.response.body", "body": b": keepalive\n\n", "more_body": True})
        except OSError:
            pass  # the page went away mid-write
        finally:
            watcher.cancel()
            closing.cancel()
            with contextlib.suppress(Exception):
                await send({"type": "http.response.body", "body": b"", "more_body": False})

    # -- lifespan ------------------------------------------------------------------

    def begin_shutdown(self) -> None:
        """End the live event streams and the connection now, so in-flight API
        requests (a tool call waiting on the user, an event stream) finish at
        once instead of holding up the server's shutdown."""
        if self.closing.is_set():
            return
        self.closing.set()
        self.hub.close()
        with contextlib.suppress(RuntimeError):  # no running loop: nothing is in flight
            self._shutdown = asyncio.get_running_loop().create_task(self.session.shutdown())

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self.started.set()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                self.begin_shutdown()
                with contextlib.suppress(Exception):
                    if self._shutdown is not None:
                        await self._shutdown
                    await self.session.shutdown()
                await send({"type": "lifespan.shutdown.complete"})
                return


def _www_auth(status: int) -> list[tuple[bytes, bytes]]:
    return [(b"www-authenticate", b'Bearer realm="mcpkit-inspector"')] if status == 401 else []


async def _respond(
    send: Send,
    status: int,
    body: bytes,
    ctype: bytes,
    extra: list[tuple[bytes, bytes]] | None = None,
    length: int | None = None,
) -> None:
    headers = [
        (b"content-type", ctype),
        (b"content-length", str(len(body) if length is None else length).encode()),
        *_SECURITY_HEADERS,
        *(extra or []),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _json(send: Send, status: int, value: Any, extra: list[tuple[bytes, bytes]] | None = None) -> None:
    await _respond(send, status, _encode(value), b"application/json", extra)
