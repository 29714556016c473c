"""A real local OAuth world for end-to-end tests: authorization servers and a protected MCP resource.

Each server is an ASGI app run by uvicorn on 127.0.0.1 with a free port. The
authorization server implements what an MCP client meets (RFC 8414 metadata at
configurable well-known paths, RFC 7591 registration, authorize with an immediate
302, authorization-code + PKCE verification, refresh, client credentials with
``client_secret_basic`` or ``private_key_jwt``) and issues HS256 JWT access tokens
with pyjwt. The resource server answers 401/403 challenges the way MCP servers
do, serves protected-resource metadata, and either echoes JSON-RPC or forwards to
a real mcpkit ``StreamableHTTPApp``. Every request is recorded for assertions.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import secrets
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, unquote_plus, urlencode

import jwt
import uvicorn

Scope = dict[str, Any]
ASGIApp = Callable[[Scope, Any, Any], Awaitable[None]]


@dataclass
class Seen:
    """One recorded request."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    form: dict[str, str]
    body: bytes


async def _read_body(receive: Any) -> bytes:
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            return body


async def _send(
    send: Any,
    status: int,
    body: Any = b"",
    headers: dict[str, str] | None = None,
    ctype: str = "application/json",
) -> None:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    raw = [(b"content-type", ctype.encode()), (b"content-length", str(len(data)).encode())]
    raw += [(k.encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": data})


async def _lifespan(receive: Any, send: Any) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


class Recorder:
    """Base: parse and record every HTTP request, then ``handle`` it."""

    def __init__(self) -> None:
        self.seen: list[Seen] = []
        self.url = ""  # set when served

    def paths(self) -> list[str]:
        return [s.path for s in self.seen]

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        body = await _read_body(receive)
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        query = dict(parse_qsl(scope["query_string"].decode(), keep_blank_values=True))
        form = (
            dict(parse_qsl(body.decode(), keep_blank_values=True))
            if headers.get("content-type", "").startswith("application/x-www-form-urlencoded")
            else {}
        )
        seen = Seen(scope["method"], scope["path"], query, headers, form, body)
        self.seen.append(seen)
        await self.handle(seen, scope, send)

    async def handle(self, seen: Seen, scope: Scope, send: Any) -> None:
        raise NotImplementedError


@dataclass
class ASConfig:
    issuer_path: str = ""
    #: Metadata paths served; None → the RFC 8414 path for the issuer.
    metadata_paths: list[str] | None = None
    issuer_override: str | None = None
    pkce_methods: list[str] | None = field(default_factory=lambda: ["S256"])
    iss_supported: bool = True
    #: "correct", "missing", "wrong", "normalized"
    iss_mode: str = "correct"
    auth_methods: list[str] | None = field(
        default_factory=lambda: ["client_secret_basic", "client_secret_post", "none"]
    )
    registration: bool = True
    cimd: bool = False
    scopes_supported: list[str] | None = None
    grant_types: list[str] | None = None
    preregistered: dict[str, str] = field(default_factory=dict)
    jwt_clients: dict[str, Any] = field(default_factory=dict)
    expires_in: int = 3600
    refresh_tokens: bool = True
    #: "redirect" (immediate 302) or "page" (200: wants a user)
    authorize_mode: str = "redirect"
    #: Endpoint overrides (for hostile-metadata tests).
    endpoints: dict[str, str] = field(default_factory=dict)


class AuthServer(Recorder):
    """A small but strict OAuth 2.1 authorization server."""

    def __init__(self, name: str = "as") -> None:
        super().__init__()
        self.name = name
        self.config = ASConfig()
        self.secret = secrets.token_bytes(32)
        self.clients: dict[str, dict[str, Any]] = {}
        self.codes: dict[str, dict[str, Any]] = {}
        self.refresh: dict[str, dict[str, Any]] = {}
        self.issued: list[dict[str, Any]] = []

    @property
    def issuer(self) -> str:
        return self.url + self.config.issuer_path

    def metadata(self) -> dict[str, Any]:
        c, base = self.config, self.issuer
        doc: dict[str, Any] = {
            "issuer": c.issuer_override or base,
            "authorization_endpoint": f"{base}/authorize",
            "token_endpoint": f"{base}/token",
            "response_types_supported": ["code"],
            "grant_types_supported": c.grant_types
            or ["authorization_code", "refresh_token", "client_credentials"],
            "authorization_response_iss_parameter_supported": c.iss_supported,
        }
        if c.registration:
            doc["registration_endpoint"] = f"{base}/register"
        if c.pkce_methods is not None:
            doc["code_challenge_methods_supported"] = c.pkce_methods
        if c.auth_methods is not None:
            doc["token_endpoint_auth_methods_supported"] = c.auth_methods
        if c.cimd:
            doc["client_id_metadata_document_supported"] = True
        if c.scopes_supported is not None:
            doc["scopes_supported"] = c.scopes_supported
        doc.update(c.endpoints)
        return doc

    def metadata_paths(self) -> list[str]:
        if self.config.metadata_paths is not None:
            return self.config.metadata_paths
        return [f"/.well-known/oauth-authorization-server{self.config.issuer_path}"]

    def token_for(self, resource: str, scope: str | None, client_id: str) -> dict[str, Any]:
        now = int(time.time())
        claims = {"iss": self.issuer, "aud": resource, "scope": scope or "", "client_id": client_id}
        claims |= {"iat": now, "exp": now + self.config.expires_in, "jti": secrets.token_hex(8)}
        token = jwt.encode(claims, self.secret, algorithm="HS256")
        response: dict[str, Any] = {"access_token": token, "token_type": "Bearer"}
        response["expires_in"] = self.config.expires_in
        if scope:
            response["scope"] = scope
        if self.config.refresh_tokens:
            refresh = secrets.token_urlsafe(16)
            self.refresh[refresh] = {"resource": resource, "scope": scope, "client_id": client_id}
            response["refresh_token"] = refresh
        self.issued.append(claims)
        return response

    async def handle(self, seen: Seen, scope: Scope, send: Any) -> None:
        path, base_path = seen.path, self.config.issuer_path
        if seen.method == "GET" and path in self.metadata_paths():
            await _send(send, 200, self.metadata())
        elif path == f"{base_path}/register" and seen.method == "POST" and self.config.registration:
            await self._register(seen, send)
        elif path == f"{base_path}/authorize":
            await self._authorize(seen, send)
        elif path == f"{base_path}/token" and seen.method == "POST":
            await self._token(seen, send)
        else:
            await _send(send, 404, {"error": "not_found"})

    async def _register(self, seen: Seen, send: Any) -> None:
        doc = json.loads(seen.body)
        methods = self.config.auth_methods or ["client_secret_basic"]
        method = doc.get("token_endpoint_auth_method")
        if method not in methods:
            method = methods[0]
        client_id = f"{self.name}-client-id-{secrets.token_hex(4)}"
        record = {"client_id": client_id, "redirect_uris": doc["redirect_uris"], "method": method, "doc": doc}
        answer = {**doc, "client_id": client_id, "token_endpoint_auth_method": method}
        if method != "none":
            record["secret"] = answer["client_secret"] = secrets.token_urlsafe(16)
            answer["client_secret_expires_at"] = 0
        self.clients[client_id] = record
        await _send(send, 201, answer)

    def _client(self, client_id: str) -> dict[str, Any] | None:
        if client_id in self.clients:
            return self.clients[client_id]
        if client_id in self.config.preregistered:
            secret = self.config.preregistered[client_id]
            return {
                "client_id": client_id,
                "secret": secret,
                "method": "client_secret_basic",
                "redirect_uris": None,
            }
        if self.config.cimd and client_id.startswith("https://"):
            return {"client_id": client_id, "method": "none", "redirect_uris": None}
        return None

    async def _authorize(self, seen: Seen, send: Any) -> None:
        q = seen.query
        client = self._client(q.get("client_id", ""))
        problems = []
        if client is None:
            problems.append("unknown client")
        elif client["redirect_uris"] is not None and q.get("redirect_uri") not in client["redirect_uris"]:
            problems.append("redirect_uri")
        if q.get("response_type") != "code" or q.get("code_challenge_method") != "S256":
            problems.append("response_type/pkce")
        if not q.get("code_challenge") or not q.get("state") or not q.get("resource"):
            problems.append("missing parameter")
        if problems:
            await _send(send, 400, {"error": "invalid_request", "error_description": ", ".join(problems)})
            return
        if self.config.authorize_mode == "page":
            await _send(send, 200, b"<html>log in</html>", ctype="text/html")
            return
        code = secrets.token_urlsafe(16)
        self.codes[code] = dict(q)
        params = {"code": code, "state": q["state"]}
        iss = {"correct": self.issuer, "wrong": "https://evil.example.com", "normalized": self.issuer + "/"}
        if self.config.iss_mode in iss:
            params["iss"] = iss[self.config.iss_mode]
        location = f"{q['redirect_uri']}?{urlencode(params)}"
        await _send(send, 302, b"", {"location": location})

    def _authenticate(self, seen: Seen) -> tuple[str | None, str]:
        """(client_id, method used) or (None, reason)."""
        auth = seen.headers.get("authorization", "")
        form = seen.form
        if auth.startswith("Basic "):
            raw = base64.b64decode(auth[6:]).decode()
            cid, _, secret = raw.partition(":")
            cid, secret = unquote_plus(cid), unquote_plus(secret)
            client = self._client(cid)
            if client is None or client.get("secret") != secret:
                return None, "bad basic credentials"
            return cid, "client_secret_basic"
        if form.get("client_assertion_type"):
            assertion = form.get("client_assertion", "")
            cid = jwt.decode(assertion, options={"verify_signature": False}).get("iss", "")
            key = self.config.jwt_clients.get(cid)
            if key is None:
                return None, "unknown jwt client"
            try:
                claims = jwt.decode(assertion, key, algorithms=["ES256", "RS256"], audience=self.issuer)
            except jwt.PyJWTError as exc:
                return None, f"bad assertion: {exc}"
            if claims.get("sub") != cid or not claims.get("jti") or claims["exp"] - claims["iat"] > 300:
                return None, "bad assertion claims"
            return cid, "private_key_jwt"
        cid = form.get("client_id", "")
        client = self._client(cid)
        if client is None:
            return None, "unknown client"
        if "client_secret" in form:
            return (
                (cid, "client_secret_post")
                if client.get("secret") == form["client_secret"]
                else (None, "bad")
            )
        return cid, "none"

    async def _token(self, seen: Seen, send: Any) -> None:
        form = seen.form
        cid, method = self._authenticate(seen)
        if cid is None:
            await _send(send, 401, {"error": "invalid_client", "error_description": method})
            return
        client = self._client(cid) or {}
        allowed = self.config.auth_methods or ["client_secret_basic"]
        if method not in allowed and method != "private_key_jwt" and client.get("method") != method:
            await _send(send, 401, {"error": "invalid_client", "error_description": f"{method} not allowed"})
            return
        grant = form.get("grant_type")
        if grant == "authorization_code":
            code = self.codes.pop(form.get("code", ""), None)
            if code is None or code["client_id"] != cid:
                await _send(send, 400, {"error": "invalid_grant"})
                return
            verifier = form.get("code_verifier", "")
            challenge = (
                base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
            )
            if challenge != code["code_challenge"]:
                await _send(
                    send, 400, {"error": "invalid_grant", "error_description": "PKCE verification failed"}
                )
                return
            if form.get("redirect_uri") != code["redirect_uri"] or form.get("resource") != code["resource"]:
                await _send(send, 400, {"error": "invalid_grant", "error_description": "redirect/resource"})
                return
            await _send(send, 200, self.token_for(code["resource"], code.get("scope"), cid))
        elif grant == "refresh_token":
            entry = self.refresh.pop(form.get("refresh_token", ""), None)
            if entry is None or entry["client_id"] != cid or form.get("resource") != entry["resource"]:
                await _send(send, 400, {"error": "invalid_grant"})
                return
            await _send(send, 200, self.token_for(entry["resource"], entry["scope"], cid))
        elif grant == "client_credentials":
            await _send(send, 200, self.token_for(form.get("resource", ""), form.get("scope"), cid))
        else:
            await _send(send, 400, {"error": "unsupported_grant_type"})


@dataclass
class RSConfig:
    #: PRM ``resource``; None → the MCP URL.
    resource: str | None = None
    prm_paths: list[str] = field(default_factory=lambda: ["/.well-known/oauth-protected-resource/mcp"])
    #: True → the first PRM path (absolute) in the challenge; a string → that URL; False → omitted.
    header_prm: bool | str = True
    challenge_scope: str | None = None
    prm_scopes: list[str] | None = None
    authorization_servers: list[str] = field(default_factory=list)
    #: JSON-RPC method → scopes it needs (403 insufficient_scope otherwise).
    required_scopes: dict[str, list[str]] = field(default_factory=dict)
    always_403: str | None = None
    #: Extra HTTP headers on the PRM response (e.g. a redirect).
    prm_status: int = 200
    prm_headers: dict[str, str] = field(default_factory=dict)


class ResourceServer(Recorder):
    """An MCP endpoint at ``/mcp`` protected by bearer JWTs from trusted authorization servers."""

    def __init__(self, *servers: AuthServer, inner: ASGIApp | None = None) -> None:
        super().__init__()
        self.trusted = list(servers)
        self.config = RSConfig()
        self.inner = inner
        self.revoked: set[str] = set()
        self.accepted: list[dict[str, Any]] = []

    @property
    def mcp_url(self) -> str:
        return f"{self.url}/mcp"

    @property
    def resource(self) -> str:
        return self.config.resource or self.mcp_url

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan" and self.inner is not None:
            await self.inner(scope, receive, send)
            return
        if scope["type"] == "http" and scope["path"] == "/mcp" and self.inner is not None:
            headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
            self.seen.append(Seen(scope["method"], "/mcp", {}, headers, {}, b""))
            denial = self._check(headers.get("authorization", ""), None)
            if denial is not None:
                await _send(send, *denial)
                return
            await self.inner(scope, receive, send)
            return
        await super().__call__(scope, receive, send)

    def challenge(self, error: str | None = None, scope: str | None = None) -> dict[str, str]:
        c = self.config
        parts = []
        if error:
            parts.append(f'error="{error}"')
        if scope:
            parts.append(f'scope="{scope}"')
        if c.header_prm is True:
            parts.append(f'resource_metadata="{self.url}{c.prm_paths[0]}"')
        elif isinstance(c.header_prm, str):
            parts.append(f'resource_metadata="{c.header_prm}"')
        return {"www-authenticate": ("Bearer " + ", ".join(parts)).strip()}

    def _check(self, authorization: str, method: str | None) -> tuple[int, Any, dict[str, str]] | None:
        c = self.config
        if not authorization.startswith("Bearer "):
            return 401, {"error": "unauthorized"}, self.challenge(scope=c.challenge_scope)
        token = authorization[7:]
        claims = None
        for server in self.trusted:
            with contextlib.suppress(jwt.PyJWTError):
                claims = jwt.decode(token, server.secret, algorithms=["HS256"], audience=self.resource)
                break
        if claims is None or token in self.revoked:
            return 401, {"error": "invalid_token"}, self.challenge("invalid_token", c.challenge_scope)
        granted = set(claims.get("scope", "").split())
        if c.always_403:
            return 403, {"error": "insufficient_scope"}, self.challenge("insufficient_scope", c.always_403)
        needed = c.required_scopes.get(method or "", [])
        if not set(needed) <= granted:
            return (
                403,
                {"error": "insufficient_scope"},
                self.challenge("insufficient_scope", " ".join(needed)),
            )
        self.accepted.append(claims)
        return None

    async def handle(self, seen: Seen, scope: Scope, send: Any) -> None:
        c = self.config
        if seen.method == "GET" and seen.path in c.prm_paths:
            servers = c.authorization_servers or [self.trusted[0].issuer]
            doc: dict[str, Any] = {"resource": self.resource, "authorization_servers": servers}
            if c.prm_scopes is not None:
                doc["scopes_supported"] = c.prm_scopes
            await _send(send, c.prm_status, doc, c.prm_headers)
            return
        if seen.path != "/mcp" or seen.method != "POST":
            await _send(send, 404, {"error": "not_found"})
            return
        message = json.loads(seen.body)
        denial = self._check(seen.headers.get("authorization", ""), message.get("method"))
        if denial is not None:
            await _send(send, *denial)
            return
        await _send(
            send, 200, {"jsonrpc": "2.0", "id": message.get("id"), "result": {"ok": message["method"]}}
        )


async def rpc(http: Any, url: str, method: str, request_id: int = 1) -> Any:
    """POST one JSON-RPC request; the HTTP response."""
    return await http.post(url, json={"jsonrpc": "2.0", "id": request_id, "method": method})


@contextlib.asynccontextmanager
async def serve(*apps: Recorder) -> AsyncIterator[None]:
    """Run each app on its own free loopback port (sets ``app.url``)."""
    servers: list[tuple[uvicorn.Server, asyncio.Task[None]]] = []
    try:
        for app in apps:
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            app.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
            config = uvicorn.Config(app, log_level="warning", lifespan="on")
            server = uvicorn.Server(config)
            task = asyncio.ensure_future(server.serve(sockets=[sock]))
            servers.append((server, task))
            while not server.started:
                if task.done():
                    task.result()
                await asyncio.sleep(0.01)
        yield
    finally:
        for server, _ in servers:
            server.should_exit = True
        for _, task in servers:
            await task


@dataclass
class World:
    """An authorization server and the MCP resource it protects, both running."""

    auth: AuthServer
    rs: ResourceServer
